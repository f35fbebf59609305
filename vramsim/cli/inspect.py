"""``vramsim inspect``: one traced workload read by module, and its op/storage graph written where asked."""

from __future__ import annotations

import json
import sys

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, result_cache, say_if_cached

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Trace, print the module tree, temporaries and peak (or their JSON); write the graph with ``--graph``."""
    from vramsim.api import inspect
    from vramsim.views.graph_export import write_graph
    from vramsim.views.inspect import render_inspection

    args = command.args
    store = result_cache(command)
    with progress(command, f"tracing {args.model}"):
        inspection = inspect(args.model, depth=args.depth, graph=args.graph is not None, cache=store or False, **command.options)
    say_if_cached(store)
    if inspection.graph is not None:
        written = write_graph(inspection.graph, args.graph)
        print(f"vramsim: wrote the op/storage graph to {written}", file=sys.stderr)
    if args.json:
        print(json.dumps(inspection.to_dict(), indent=2))
    else:
        render_inspection(inspection, console, fold=args.layers == "fold")
    return 0
