"""``vramsim validate``: the workload run for real, its measured peak beside the prediction."""

from __future__ import annotations

import argparse

from rich.console import Console

from vramsim.cli.arguments import workload_options
from vramsim.cli.output import progress, show

__all__ = ["run"]


def run(args: argparse.Namespace, console: Console) -> int:
    """Run and trace the workload, then print both peaks and the error (or their JSON)."""
    from vramsim.validation.validate import validate
    from vramsim.views.validation import render_validations

    with progress(args, f"running {args.model} for real on the cpu"):
        result = validate(args.model, **workload_options(args))
    show(args, result, lambda one, out: render_validations([one], out), console)
    return 0
