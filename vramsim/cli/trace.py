"""``vramsim trace``: one traced workload, its peak, and when it does not fit, advice that was traced too."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console

from vramsim.cli.arguments import NOT_FIT_EXIT, workload_options
from vramsim.cli.output import progress
from vramsim.errors import ConfigError

__all__ = ["run"]


def _more_advice(model: str, report: Any, given: dict[str, Any], tell: Callable[[str], None]) -> list[str]:
    """A job that does not fit: the report's advice, then what needs more traces (another weight dtype or
    optimizer, the largest batch size and sequence length), each traced."""
    from vramsim.search.advice import retraced_advice
    from vramsim.search.fitting import largest_fit
    from vramsim.views.fit import fit_advice

    advice = [*report.advice, *retraced_advice(model, report, given, progress=tell)]
    if report.task != "generate" and not report.components and given["checkpointing"] != "all":
        advice += fit_advice(largest_fit(model, traced=report, progress=tell, **given))
    return advice


def run(args: argparse.Namespace, console: Console) -> int:
    """Trace, print the report (or its JSON); ``--fail-if-not-fit`` turns a job that does not fit into a status."""
    from vramsim.api import simulate
    from vramsim.views.report import render_report

    given = workload_options(args)
    with progress(args, f"tracing {args.model}") as tell:
        report = simulate(args.model, **given)
        if report.fits is False and not args.no_search:
            report = dataclasses.replace(report, advice=_more_advice(args.model, report, given, tell))
    for warning in report.warnings:
        print(f"vramsim: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render_report(report, console, fold=args.layers == "fold")
    if args.fail_if_not_fit and report.fits is None:
        raise ConfigError("--fail-if-not-fit judges a GPU's memory; the cpu target has no fixed size (choose --device)")
    return NOT_FIT_EXIT if args.fail_if_not_fit and report.fits is False else 0
