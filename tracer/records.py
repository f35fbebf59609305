"""What the tracer records: one row per storage and per op, on a single event clock."""

from __future__ import annotations

from dataclasses import dataclass, field

from .categories import Category, Phase

__all__ = ["OpRecord", "StorageRecord", "Trace"]

BEFORE_TRACE = 0
"""Event clock of storages that already existed when tracing began (weights, buffers)."""


@dataclass(slots=True, kw_only=True)
class StorageRecord:
    """One storage: the unit the allocator hands out, shared by all views of it."""

    sid: int
    """Index of this storage in ``Trace.storages``."""
    nbytes: int
    shape: tuple[int, ...]
    """Shape of the first tensor seen on this storage."""
    dtype: str
    device: str
    """The device the program put it on (``meta`` stands for the simulated target)."""
    op: str
    """The aten op that allocated it, or ``"<pre-existing>"``."""
    module: str
    """Innermost module active at allocation ("" outside any module)."""
    phase: Phase
    step: int
    """Training/inference step index (0-based), -1 before the first step."""
    alloc_clock: int
    free_clock: int | None = None
    """Clock of the free event; ``None`` while still live at the end of the trace."""
    category: Category = Category.TEMPORARY


@dataclass(slots=True, kw_only=True)
class OpRecord:
    """One aten op as the dispatcher ran it."""

    index: int
    name: str
    module: str
    phase: Phase
    step: int
    inputs: tuple[int, ...]
    """Storage ids the op read (views resolved to their storage)."""
    outputs: tuple[int, ...]
    """Storage ids the op allocated."""
    clock_after: int
    """Event clock right after the op's own allocations."""


@dataclass(slots=True, kw_only=True)
class Trace:
    """Everything one traced run produced, with no tensors held."""

    storages: list[StorageRecord] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    events: list[tuple[int, bool]] = field(default_factory=list)
    """The timeline: ``(sid, is_alloc)`` per event; event ``i`` has clock ``i + 1``."""
    step_clocks: list[tuple[int, int]] = field(default_factory=list)
    """``(first_clock, last_clock)`` of each step, in order."""
    notes: list[str] = field(default_factory=list)
    """Assumptions the run made (data-dependent values, emulated kernels)."""
