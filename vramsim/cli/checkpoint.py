"""``vramsim checkpoint``: a training checkpoint's files, and the memory its save and restore take."""

from __future__ import annotations

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, result_cache, say_if_cached, show
from vramsim.cli.pages import write_page

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Trace the training step and its checkpoint, then print the report (or its JSON)."""
    from vramsim.checkpoints.checkpoint import checkpoint
    from vramsim.views.checkpoint import render_checkpoint

    args = command.args
    store = result_cache(command)
    with progress(command, f"tracing {args.model} and its checkpoint"):
        report = checkpoint(
            args.model,
            save_format=args.save_format,
            map_location=args.map_location,
            async_save=args.async_save,
            cache=store or False,
            **command.options,
        )
    say_if_cached(store)
    show(command, report, render_checkpoint, console)
    if args.html:
        from vramsim.views.html import checkpoint_html

        write_page(args.html, checkpoint_html(report))
    return 0
