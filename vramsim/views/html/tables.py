"""The report's tables as HTML: the breakdown at the peak and the per-layer table, alike layers folded and
each run expandable to its layers."""

from __future__ import annotations

import html

from vramsim.results.report import Report
from vramsim.views.folding import PEFT_PREFIX, FoldedRow, fold_layers
from vramsim.views.report import saved_cell
from vramsim.views.units import format_bytes

__all__ = ["breakdown_table", "layers_table"]

_LAYER_HEADERS = ("module", "parameters", "param bytes", "saved activations", "peak while running")
"""The terminal's column names (``views/report.py``), on one line each."""


def breakdown_table(report: Report) -> str:
    """Bytes and share of each category at the peak."""
    rows = "".join(
        f"<tr><td>{html.escape(category)}</td><td class=n>{format_bytes(nbytes)}</td>"
        f"<td class=n>{nbytes / max(report.peak_bytes, 1):.1%}</td></tr>"
        for category, nbytes in report.breakdown.items()
    )
    return f"<table><tr><th>category</th><th>bytes</th><th>share</th></tr>{rows}</table>"


def layers_table(report: Report) -> str:
    """The per-layer table folded as the terminal folds it; a folded run opens (``<details>``) to its layers."""
    peft = bool(report.layers) and all(row.module.startswith(PEFT_PREFIX) for row in report.layers)
    body, at = [], 0
    for folded in fold_layers(report.layers):
        name = _name(folded.module, peft)
        if folded.count > 1:
            layers = fold_layers(report.layers[at : at + folded.count], fold=False)
            inner = "".join(_row(_name(row.module, peft), row) for row in layers)
            name = f"<details><summary>{name}</summary><table>{inner}</table></details>"
        body.append(_row(name, folded))
        at += folded.count
    header = "".join(f"<th>{h}</th>" for h in _LAYER_HEADERS)
    note = f"<p>module names without peft's {PEFT_PREFIX} prefix</p>" if peft else ""
    return f"{note}<table><tr>{header}</tr>{''.join(body)}</table>"


def _name(module: str, peft: bool) -> str:
    return html.escape(module.removeprefix(PEFT_PREFIX) if peft else module)


def _row(cell: str, row: FoldedRow) -> str:
    peak = format_bytes(row.peak_bytes) if row.peak_bytes else "-"
    numbers = (f"{row.parameters:,}", format_bytes(row.parameter_bytes), saved_cell(*row.activation_bytes), peak)
    return f"<tr><td>{cell}</td>{''.join(f'<td class=n>{n}</td>' for n in numbers)}</tr>"
