"""Validations (predicted beside measured peaks) as a table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from vramsim.results.validation import Validation
from vramsim.views.units import format_bytes

__all__ = ["render_validations"]


def render_validations(results: list[Validation], console: Console) -> None:
    """Each run's predicted and measured peak, and the error between them: how far a prediction is to be trusted."""
    table = Table(title="Predicted vs measured (steady-state peak)", title_justify="left")
    for name in ("model", "device", "predicted", "measured", "error"):
        table.add_column(name, justify="left" if name in ("model", "device") else "right")
    for result in results:
        table.add_row(
            result.model,
            result.device,
            format_bytes(result.predicted_bytes),
            format_bytes(result.measured_bytes),
            f"{result.error:+.3%}",
        )
    console.print(table)
