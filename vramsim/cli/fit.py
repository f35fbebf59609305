"""``vramsim fit``: the largest batch size and sequence length that fit, under the cheapest layout with ``--strategies``."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from vramsim.cli.arguments import workload_options
from vramsim.cli.output import progress, show

__all__ = ["run"]


def run(args: argparse.Namespace, console: Console) -> int:
    """Search (each size a trace), then print the sizes found, after the strategies tried when asked for."""
    from vramsim.search.fitting import largest_fit
    from vramsim.search.strategy import cheapest_strategy
    from vramsim.views.fit import render_fit, render_strategies

    options = workload_options(args)
    with progress(args, f"searching the largest fit of {args.model}") as tell:
        search = cheapest_strategy(args.model, progress=tell, **options) if args.strategies else None
        if search is not None and search.cheapest is None:
            fit = None
        else:
            fit = largest_fit(args.model, progress=tell, **options | (search.options() if search else {}))
    if search is None:
        show(args, fit, render_fit, console)
    elif args.json:
        print(json.dumps({"strategies": search.to_dict(), "largest": fit.to_dict() if fit else None}, indent=2))
    else:
        render_strategies(search, console)
        if fit is not None:
            console.print("Under that setting:")
            render_fit(fit, console)
    return 0
