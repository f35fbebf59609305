"""``vramsim plan``: the offers of a price sheet that hold a training job, each GPU count with its cheapest setting
and quote, cheapest first."""

from __future__ import annotations

from rich.console import Console

from vramsim.cli.arguments import NOT_FIT_EXIT
from vramsim.cli.command import Command
from vramsim.cli.output import progress, result_cache, say_if_cached, show
from vramsim.cli.pages import write_page

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Search each offer's GPU counts, quote each that fits, print them ranked; ``NOT_FIT_EXIT`` with
    ``--fail-if-none`` when none does."""
    from vramsim.api import plan
    from vramsim.views.plan import render_plan

    args = command.args
    assert command.sheet is not None, "plan's sheet is read with its arguments"
    duration = {
        "tokens": args.tokens,
        "days": args.days,
        "hours": args.hours,
        "mfu": args.mfu,
        "max_gpus": args.max_gpus,
        "stop_after_hours": args.stop_after,
    }
    store = result_cache(command)
    with progress(command, f"planning {args.model} over {len(command.sheet.offers)} offer(s)") as told:
        found = plan(args.model, prices=command.sheet, progress=told, cache=store or False, **duration, **command.options)
    say_if_cached(store)
    show(command, found, render_plan, console)
    if args.html:
        from vramsim.views.html import plan_html

        write_page(args.html, plan_html(found))
    return NOT_FIT_EXIT if args.fail_if_none and not found.rows else 0
