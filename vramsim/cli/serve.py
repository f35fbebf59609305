"""``vramsim serve``: the KV cache a serving engine gets after the weights and its profile run, and the concurrency."""

from __future__ import annotations

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, result_cache, say_if_cached, show
from vramsim.cli.pages import write_page

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Trace the engine's profile run, then print the budget (or its JSON)."""
    from vramsim.serving.budget import serve
    from vramsim.views.serving import render_serve

    store = result_cache(command)
    with progress(command, f"tracing {command.args.model}"):
        served = serve(command.args.model, cache=store or False, **command.options)
    say_if_cached(store)
    show(command, served, render_serve, console)
    if command.args.html:
        from vramsim.views.html import serve_html

        write_page(command.args.html, serve_html(served))
    return 0
