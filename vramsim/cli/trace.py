"""``vramsim trace``: one traced workload, its peak, and when it does not fit, advice that was traced too."""

from __future__ import annotations

import json
import sys
import time

from rich.console import Console

from vramsim.cli.arguments import NOT_FIT_EXIT
from vramsim.cli.command import Command
from vramsim.cli.exports import export_paths, write_exports
from vramsim.cli.output import progress, result_cache
from vramsim.cli.pages import write_page
from vramsim.cli.wording import in_cli_words
from vramsim.errors import ConfigError

__all__ = ["QUICK_SKIPPED", "run"]

QUICK_SKIPPED = (
    "--quick: the advice that needs more traces (another dtype or optimizer, the largest batch size and sequence "
    "length) was skipped; run without --quick for it"
)


def run(command: Command, console: Console) -> int:
    """Trace, print the report (or its JSON); ``--fail-if-not-fit`` turns a job that does not fit into a status."""
    from vramsim.api import simulate
    from vramsim.views.report import render_report

    args = command.args
    store = result_cache(command)
    with progress(command, f"tracing {args.model}") as told:
        report = simulate(
            args.model, advice="graph" if args.quick else "traced", progress=told, cache=store or False, **command.options
        )
    for warning in report.warnings:
        if warning not in command.warnings:  # those were printed once the arguments were checked
            print(f"vramsim: warning: {in_cli_words(warning)}", file=sys.stderr)
    if args.quick and report.fits is False:
        print(f"vramsim: {QUICK_SKIPPED}", file=sys.stderr)
    write_exports(report, export_paths(args))
    if args.json:
        print(json.dumps(report.to_dict(timeline=args.timeline), indent=2))
    else:
        wall = time.perf_counter() - command.started
        traces = 0 if store is not None and store.answered else 1 + told.stages  # 0: answered from the cache
        render_report(report, console, fold=args.layers == "fold", took=(wall, traces))
    if args.html:
        from vramsim.views.html import report_html

        write_page(args.html, report_html(report))
    if args.fail_if_not_fit and report.fits is None:
        raise ConfigError("--fail-if-not-fit judges a GPU's memory; the cpu target has no fixed size (choose --device)")
    return NOT_FIT_EXIT if args.fail_if_not_fit and report.fits is False else 0
