"""``vramsim compare``: variants of one job side by side, one trace per distinct program, the rest what-ifs; with
``--serve``, serving deployments of one model, each budgeted as ``vramsim serve`` budgets it."""

from __future__ import annotations

import dataclasses
import sys

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, result_cache, say_if_cached, show
from vramsim.cli.pages import write_page
from vramsim.cli.wording import in_cli_words

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Trace each distinct program, then print the table of variants (or its JSON)."""
    if command.args.serve:
        return _run_serving(command, console)
    args = command.args
    from vramsim.api import compare
    from vramsim.views.compare import render_comparison

    store = result_cache(command)
    with progress(command, f"tracing {args.model} for {len(command.variants)} variants") as told:
        comparison = compare(args.model, command.variants, progress=told, cache=store or False)
    say_if_cached(store)
    told_once = set(command.warnings)  # printed once the arguments were checked
    for each in comparison.variants:
        for warning in each.report.warnings:
            if warning not in told_once:
                told_once.add(warning)
                print(f"vramsim: warning: {in_cli_words(warning)}", file=sys.stderr)
    show(command, comparison, render_comparison, console)
    if args.html:
        from vramsim.views.html import compare_html

        write_page(args.html, compare_html(comparison))
    return 0


def _run_serving(command: Command, console: Console) -> int:
    """Budget each serving variant, then print the table (or its JSON: the API's words); an engine's refusal is
    shown in the flags' words, as ``vramsim serve`` prints it."""
    args = command.args
    from vramsim.serving.compare import compare_serve
    from vramsim.views.compare_serving import render_serve_comparison

    store = result_cache(command)
    with progress(command, f"tracing {args.model} for {len(command.variants)} serving variants") as told:
        comparison = compare_serve(args.model, command.variants, progress=told, cache=store or False)
    say_if_cached(store)
    worded = dataclasses.replace(
        comparison,
        variants=[
            dataclasses.replace(each, refused=None if each.refused is None else in_cli_words(each.refused))
            for each in comparison.variants
        ],
    )
    show(command, comparison, lambda _, shown: render_serve_comparison(worded, shown), console)
    if args.html:
        from vramsim.views.html import compare_serve_html

        write_page(args.html, compare_serve_html(worded))
    return 0
