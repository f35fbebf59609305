"""The memory timeline of a report's steady-state step as data: sampled points, phase spans, the usable line.

A long step has hundreds of thousands of events, more than a plot can show; the points keep, per bucket of
events, the lowest and highest allocated and the highest reserved, and always the peaks themselves, so the
highest allocated point is ``Report.peak_bytes`` and the highest reserved one the replay's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MemoryTimeline", "PhaseSpan", "TimelinePoint"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelinePoint:
    """What the device holds right after one event, and the event itself."""

    event: int
    """Index of the event in the replayed timeline (the step's events are ``MemoryTimeline.first_event``..``last_event``)."""
    allocated_bytes: int
    """``memory_allocated()`` after the event (rounded blocks on a GPU, allocated overheads included)."""
    reserved_bytes: int
    """``memory_reserved()`` after the event: the caching allocator's segments (reserved-only overheads not included)."""
    categories: dict[str, int]
    """``allocated_bytes`` by category, named as ``Report.breakdown`` names them; sums to it."""
    allocates: bool
    """True: the event allocates the block below; False: it frees it."""
    nbytes: int
    """Bytes of that block on the device."""
    op: str
    """The aten op that allocated the block."""
    module: str
    """Innermost module active when it was allocated ("" outside the model)."""
    phase: str
    """The phase running at the event (a pipeline's component phase, ``encode_prompt``, ``denoise``, ``decode``)."""
    step: int
    shape: tuple[int, ...] | None
    """Shape of the block's first tensor, as traced; ``None`` for a block no traced storage stands behind."""
    dtype: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseSpan:
    """Consecutive events of one phase."""

    phase: str
    first_event: int
    last_event: int
    """Inclusive."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryTimeline:
    """The steady-state (last) step of the replay the report's figures come from (the busiest rank's, stage's or GPU's)."""

    first_event: int
    last_event: int
    """The step's events, inclusive, in the replayed timeline."""
    points: list[TimelinePoint]
    """In event order, at most ``vramsim.analysis.timeline.TIMELINE_POINTS``."""
    peak_event: int
    """The event of ``Report.peak_bytes`` (a point)."""
    reserved_peak_event: int
    """The first event at the highest reserved (a point)."""
    phases: list[PhaseSpan]
    reserved_overhead_bytes: int
    """Reserved by the runtime outside the caching allocator (added to the reserved line for ``Report.reserved_bytes``)."""
    device_overhead_bytes: int
    """What the device holds beyond reserved (CUDA context, NCCL): the device line is reserved plus both overheads."""
    usable_bytes: int | None
    """The capacity less the headroom, what the device figure must stay within; ``None`` for the cpu."""
    capacity_bytes: int | None
