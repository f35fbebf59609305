"""``vramsim trace``: one traced workload, its peak, and when it does not fit, advice that was traced too."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from vramsim.cli.arguments import NOT_FIT_EXIT, workload_options
from vramsim.cli.output import progress
from vramsim.errors import ConfigError

__all__ = ["run"]


def run(args: argparse.Namespace, console: Console) -> int:
    """Trace, print the report (or its JSON); ``--fail-if-not-fit`` turns a job that does not fit into a status."""
    from vramsim.api import simulate
    from vramsim.views.report import render_report

    given = workload_options(args)
    with progress(args, f"tracing {args.model}") as tell:
        report = simulate(args.model, advice="graph" if args.no_search else "traced", progress=tell, **given)
    for warning in report.warnings:
        print(f"vramsim: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render_report(report, console, fold=args.layers == "fold")
    if args.fail_if_not_fit and report.fits is None:
        raise ConfigError("--fail-if-not-fit judges a GPU's memory; the cpu target has no fixed size (choose --device)")
    return NOT_FIT_EXIT if args.fail_if_not_fit and report.fits is False else 0
