"""The caching allocator's history over the report's timeline: what ``_record_memory_history`` would record.

Kept apart from the ``Report``'s figures and made only when asked (``simulate(..., memory_history=True)``):
every allocator action of the replay the figures come from (after the what-ifs), the segments at its end,
and what each allocation holds. The exports (``views/memory_viz.py``, ``views/chrome_trace.py``) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AllocatorAction", "HistoryTensor", "MemoryHistory", "SegmentBlock", "SegmentRecord", "TracedOp"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryTensor:
    """What one allocation holds: the storage a traced op made, or one a what-if added in its image."""

    op: str
    """The aten op that allocated it (``""`` for an allocated overhead)."""
    module: str
    phase: str
    step: int
    category: str
    nbytes: int
    """Bytes requested (the storage's ``nbytes``); the block may be larger (rounding, an unsplit remainder)."""
    shape: tuple[int, ...] | None
    """The traced tensor's shape and dtype; ``None`` where the block has no traced storage behind it
    (an overhead, a communication buffer). A sharded copy keeps the traced tensor's shape."""
    dtype: str | None
    sid: int | None
    """The traced storage it is (``None`` for an added block)."""
    copy_of: int | None
    """For a block a what-if added in the image of a traced storage (a recomputed activation): that sid."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatorAction:
    """One ``TraceEntry``: an action of the caching allocator."""

    action: str
    """``segment_alloc``, ``segment_free``, ``segment_map``, ``segment_unmap``, ``alloc``, ``free_requested`` or
    ``free_completed``."""
    addr: int
    size: int
    """The block's bytes (rounded, what ``memory_allocated`` counts), or the segment's / mapped pages'."""
    event: int
    """Index of the timeline event it belongs to: the time axis (event order, not wall time)."""
    tensor: int | None
    """Index in ``MemoryHistory.tensors`` of the allocation's tensor; ``None`` for a segment's action."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentBlock:
    """A block of a segment at the end of the replay."""

    address: int
    size: int
    tensor: int | None
    """Index in ``MemoryHistory.tensors`` of the live tensor it holds; ``None`` for a cached free block."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentRecord:
    """A segment at the end (with expandable segments, a contiguous mapped range); its blocks tile it."""

    address: int
    size: int
    small: bool
    expandable: bool
    blocks: list[SegmentBlock]


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedOp:
    """One traced aten op, for a time axis of one tick per op."""

    name: str
    module: str
    phase: str
    step: int
    clock_after: int
    """Event clock right after the op's own allocations (``OpRecord.clock_after``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHistory:
    """Every allocator action of the report's replay, the segments at its end, and the traced ops."""

    actions: list[AllocatorAction]
    segments: list[SegmentRecord]
    tensors: list[HistoryTensor]
    events: int
    """Timeline events replayed (``AllocatorAction.event`` runs 0..events-1)."""
    event_clocks: list[int]
    """The trace clock of each timeline event (a what-if's events carry the clock they follow)."""
    ops: list[TracedOp]
    steady_first_event: int
    """Where the last (steady-state) step begins: the report's peaks are over events from here on."""
    expandable_segments: bool
    allocated_overhead_bytes: int
    """Allocated overheads (the cuBLAS workspace): in the history as one ``alloc``, as the allocator makes them."""
    reserved_overhead_bytes: int
    """Reserved-only overheads added outside the allocator: ``Report.reserved_bytes`` is the segments' peak plus these."""

    def __repr__(self) -> str:
        return f"<MemoryHistory actions={len(self.actions)} segments={len(self.segments)}>"
