"""``vramsim compare``: variants of one job side by side, one trace per distinct program, the rest what-ifs."""

from __future__ import annotations

import sys

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, show
from vramsim.cli.wording import in_cli_words
from vramsim.errors import UnsupportedError

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Trace each distinct program, then print the table of variants (or its JSON)."""
    args = command.args
    if args.html is not None:
        raise UnsupportedError("compare --html (the variants' timelines in one page) is not written yet; use --json")
    from vramsim.api import compare
    from vramsim.views.compare import render_comparison

    with progress(command, f"tracing {args.model} for {len(command.variants)} variants") as told:
        comparison = compare(args.model, command.variants, progress=told)
    told_once = set(command.warnings)  # printed once the arguments were checked
    for each in comparison.variants:
        for warning in each.report.warnings:
            if warning not in told_once:
                told_once.add(warning)
                print(f"vramsim: warning: {in_cli_words(warning)}", file=sys.stderr)
    show(command, comparison, render_comparison, console)
    return 0
