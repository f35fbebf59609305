"""``vramsim validate``: the workload run for real, its measured peak beside the prediction."""

from __future__ import annotations

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, show

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Run and trace the workload, then print both peaks and the error (or their JSON)."""
    from vramsim.validation.validate import validate
    from vramsim.views.validation import render_validations

    with progress(command, f"running {command.args.model} for real on the cpu"):
        result = validate(command.args.model, **command.options)
    show(command, result, lambda one, out: render_validations([one], out), console)
    return 0
