"""From records, graph and liveness to the figures of a Report."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import networkx as nx
import torch

from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.liveness import Liveness, live_storages
from vramsim.tracer.records import Trace

from .report import LayerRow, PeakSite

__all__ = ["LayerSpec", "Steady", "count_parameters", "layer_rows", "layer_specs", "steady_peak"]


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """A row of the per-layer table as the model defines it, before tracing."""

    module: str
    parameters: int
    parameter_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Steady:
    """The peak of the last step and what is live then."""

    peak_bytes: int
    clock: int
    site: PeakSite
    breakdown: dict[str, int]


def count_parameters(module: torch.nn.Module) -> int:
    """Parameters counted once each (``parameters()`` already skips tied duplicates)."""
    return sum(p.numel() for p in module.parameters())


def layer_specs(model: torch.nn.Module) -> list[LayerSpec]:
    """Each module down to the decoder layer: containers holding a layer list are opened up."""
    rows: list[LayerSpec] = []

    def visit(module: torch.nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            path = f"{prefix}{name}"
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) or _holds_layer_list(child):
                visit(child, f"{path}.")
            else:
                rows.append(LayerSpec(path, count_parameters(child), sum(p.nbytes for p in child.parameters())))

    visit(model, "")
    return rows


def _holds_layer_list(module: torch.nn.Module) -> bool:
    return any(isinstance(m, (torch.nn.ModuleList, torch.nn.ModuleDict)) for m in module.modules())


def steady_peak(trace: Trace, graph: nx.DiGraph, live: Liveness) -> Steady:
    """The peak over the last step's clocks, where it happened and its breakdown by category."""
    first, last = trace.step_clocks[-1]
    peak, clock = live.peak(first, last)
    site = _site_at(trace, clock)
    breakdown: dict[str, int] = defaultdict(int)
    for _, nbytes, category in live_storages(graph, clock):
        breakdown[str(category)] += nbytes
    ordered = {str(c): breakdown[str(c)] for c in Category if breakdown.get(str(c))}
    return Steady(peak_bytes=peak, clock=clock, site=site, breakdown=ordered)


def _site_at(trace: Trace, clock: int) -> PeakSite:
    if clock == 0 or not trace.events:
        return PeakSite(step=-1, phase=str(Phase.SETUP), op="", module="")
    sid, _ = trace.events[clock - 1]
    record = trace.storages[sid]
    return PeakSite(step=record.step, phase=str(record.phase), op=record.op, module=record.module)


def layer_rows(specs: list[LayerSpec], trace: Trace, live: Liveness) -> list[LayerRow]:
    """Saved activation bytes and own peak of each row over the last step."""
    names = [spec.module for spec in specs]
    row_of = _row_finder(tuple(names))
    last_step = len(trace.step_clocks) - 1
    saved: dict[str, int] = defaultdict(int)
    for record in trace.storages:
        if record.step == last_step and record.category is Category.ACTIVATION and record.phase is Phase.FORWARD:
            row = row_of(record.module)
            if row is not None:
                saved[row] += record.nbytes
    peaks: dict[str, int] = defaultdict(int)
    for op in trace.ops:
        if op.step == last_step:
            row = row_of(op.module)
            if row is not None:
                peaks[row] = max(peaks[row], live.live_at_op(op.index))
    return [
        LayerRow(
            module=spec.module,
            parameters=spec.parameters,
            parameter_bytes=spec.parameter_bytes,
            activation_bytes=saved[spec.module],
            peak_bytes=peaks[spec.module],
        )
        for spec in specs
    ]


def _row_finder(names: tuple[str, ...]) -> Callable[[str], str | None]:
    """Map a module path to the table row that contains it (or None), memoised."""
    rows = set(names)

    @cache
    def row_of(module: str) -> str | None:
        path = module
        while path:
            if path in rows:
                return path
            path, _, _ = path.rpartition(".")
        return None

    return row_of
