"""Repeated layers folded into one row of the per-layer table (``model.layers.0-31 x32``)."""

from __future__ import annotations

from dataclasses import dataclass

from vramsim.results.report import LayerRow

__all__ = ["PEFT_PREFIX", "FoldedRow", "fold_layers", "without_peft_prefix"]

PEFT_PREFIX = "base_model.model."
"""What peft's ``PeftModel`` puts before every module path; the table drops it (and says so once)."""


def without_peft_prefix(path: str) -> str:
    """A module path as the model itself names it: peft's wrapper prefix dropped, and the wrapped model
    (``base_model.model``) the top level, which has no name."""
    return "" if path == PEFT_PREFIX.rstrip(".") else path.removeprefix(PEFT_PREFIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldedRow:
    """One row as displayed: a module, or a run of ``count`` alike layers (figures per layer)."""

    module: str
    count: int
    parameters: int
    """One layer's (the same for every layer of the run)."""
    parameter_bytes: int
    activation_bytes: tuple[int, int]
    """Least and most saved by one layer of the run (equal when they all save the same)."""
    peak_bytes: int
    """The highest while any layer of the run ran; 0 if none ran."""


def fold_layers(rows: list[LayerRow], *, fold: bool = True) -> list[FoldedRow]:
    """Consecutive rows whose paths differ only in one index that counts up by one, with the same
    parameter count and parameter bytes (the same structure), become one row named by the index
    range. Their parameters and parameter bytes are one layer's, saved activations the least and the
    most one layer saves (layer 0 saves less: its input is the embedding's output), and the peak the
    highest while any of them ran. ``fold=False`` gives one row per module (``--layers all``)."""
    runs: list[list[LayerRow]] = []
    for row in rows:
        if fold and runs and _continues(runs[-1], row):
            runs[-1].append(row)
        else:
            runs.append([row])
    return [_folded(run) for run in runs]


def _continues(run: list[LayerRow], row: LayerRow) -> bool:
    last, this = _indexed(run[-1].module), _indexed(row.module)
    if last is None or this is None:
        return False
    same_shape = (run[-1].parameters, run[-1].parameter_bytes) == (row.parameters, row.parameter_bytes)
    return same_shape and (last[0], last[2]) == (this[0], this[2]) and this[1] == last[1] + 1


def _indexed(path: str) -> tuple[str, int, str] | None:
    """A module path split at its last numeric component: ``model.layers.7.mlp`` -> ``model.layers.``, 7, ``.mlp``."""
    parts = path.split(".")
    for at in range(len(parts) - 1, -1, -1):
        if parts[at].isdigit():
            return ".".join([*parts[:at], ""]), int(parts[at]), "".join("." + part for part in parts[at + 1 :])
    return None


def _folded(run: list[LayerRow]) -> FoldedRow:
    first = run[0]
    saved = [row.activation_bytes for row in run]
    name = first.module
    if len(run) > 1:
        head, start, tail = _indexed(first.module) or ("", 0, "")
        name = f"{head}{start}-{start + len(run) - 1}{tail} x{len(run)}"
    return FoldedRow(
        module=name,
        count=len(run),
        parameters=first.parameters,
        parameter_bytes=first.parameter_bytes,
        activation_bytes=(min(saved), max(saved)),
        peak_bytes=max(row.peak_bytes for row in run),
    )
