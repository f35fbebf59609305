"""``vramsim serve``: the KV cache a serving engine gets after the weights and its profile run, and the concurrency."""

from __future__ import annotations

import argparse

from rich.console import Console

from vramsim.cli.output import progress, show
from vramsim.config.serving import serve_options

__all__ = ["run"]


def run(args: argparse.Namespace, console: Console) -> int:
    """Trace the engine's profile run, then print the budget (or its JSON)."""
    from vramsim.serving.budget import serve
    from vramsim.views.serving import render_serve

    with progress(args, f"tracing {args.model}"):
        served = serve(args.model, **{spec.name: getattr(args, spec.name) for spec, _ in serve_options()})
    show(args, served, render_serve, console)
    return 0
