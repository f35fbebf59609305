"""What the caching allocator records when asked: its actions, and the segments and blocks it holds.

The records of ``CachingAllocator(record=True)`` (``allocator.py``): one ``HistoryEntry`` per action, as
``_record_memory_history`` records a ``TraceEntry``, and ``SegmentState`` per segment, as
``torch.cuda.memory._snapshot()`` lists them (``DeviceCachingAllocator::snapshot``: with expandable
segments, one per contiguous mapped range).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .allocator_blocks import Block

__all__ = ["HistoryEntry", "SegmentState", "segment_states"]


class HistoryEntry(NamedTuple):
    """One action of the allocator, as ``_record_memory_history`` records it (its ``TraceEntry``); a tuple,
    the quickest record to make once per action."""

    action: Literal["segment_alloc", "segment_free", "segment_map", "segment_unmap", "alloc", "free_requested", "free_completed"]
    addr: int
    size: int
    """Bytes of the block (its rounded size, what ``memory_allocated`` counts) or of the segment / mapped pages."""
    call: int
    """Index of the ``malloc``/``free`` call it belongs to (an ``empty_cache`` belongs to the call after it)."""
    key: int | None
    """The storage of an ``alloc``/``free_*``; ``None`` for a segment's action."""


@dataclass(frozen=True, slots=True)
class SegmentState:
    """One segment at the end (with expandable segments, one contiguous mapped range), as ``_snapshot`` lists it."""

    address: int
    size: int
    small: bool
    """Whether it belongs to the small pool (``segment_type`` ``"small"``)."""
    expandable: bool
    blocks: list[tuple[int, int, int | None]]
    """``(address, size, key)`` in address order, tiling the segment; ``key`` ``None`` for a cached free block."""


def segment_states(live: Mapping[int, Block | None], cached: Iterable[Block]) -> list[SegmentState]:
    """The segments that the ``live`` blocks (by storage key) and the ``cached`` free ones make up, in address
    order: each from a block with no mapped block before it, walked along its mapped neighbours."""
    owner = {id(block): key for key, block in live.items() if block is not None}
    blocks = [block for block in live.values() if block is not None] + list(cached)
    heads = sorted((b for b in blocks if b.prev is None or not b.prev.mapped), key=lambda b: b.ptr)
    segments = []
    for head in heads:
        tiles: list[tuple[int, int, int | None]] = []
        walk: Block | None = head
        while walk is not None and walk.mapped:
            tiles.append((walk.ptr, walk.size, owner.get(id(walk))))
            walk = walk.next
        segments.append(SegmentState(head.ptr, sum(tile[1] for tile in tiles), head.pool.small, head.segment is not None, tiles))
    return segments
