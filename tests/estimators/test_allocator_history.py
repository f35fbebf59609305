"""The caching allocator's recorded history: the actions ``_record_memory_history`` records, and the segments at the end."""

from __future__ import annotations

import random

import pytest

from vramsim.estimators.allocator import AllocatorConfig, CachingAllocator
from vramsim.estimators.allocator_history import HistoryEntry

_MiB = 1 << 20
_GROWS = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
_HOLDS = {"alloc": 1, "free_completed": -1}


def _peaks(history: list[HistoryEntry]) -> tuple[int, int]:
    """(peak allocated, peak reserved) summed from the history alone."""
    allocated = reserved = peak_allocated = peak_reserved = 0
    for entry in history:
        allocated += _HOLDS.get(entry.action, 0) * entry.size
        reserved += _GROWS.get(entry.action, 0) * entry.size
        peak_allocated, peak_reserved = max(peak_allocated, allocated), max(peak_reserved, reserved)
    return peak_allocated, peak_reserved


def test_not_recording_keeps_no_history() -> None:
    allocator = CachingAllocator()
    allocator.malloc(0, 100)
    assert allocator.history is None


def test_a_new_segment_then_its_block_then_the_free_in_two_steps() -> None:
    """A 3 MiB request: a 20 MiB segment (segment_alloc), the block at its start (alloc), and on one stream
    a free completes as it is requested; empty_cache files its segment_free under the next call."""
    allocator = CachingAllocator(record=True)
    allocator.malloc(7, 3 * _MiB)
    allocator.free(7)
    allocator.empty_cache()
    history = allocator.history
    assert history is not None
    base = history[0].addr
    assert [(e.action, e.addr - base, e.size, e.call, e.key) for e in history] == [
        ("segment_alloc", 0, 20 * _MiB, 0, None),
        ("alloc", 0, 3 * _MiB, 0, 7),
        ("free_requested", 0, 3 * _MiB, 1, 7),
        ("free_completed", 0, 3 * _MiB, 1, 7),
        ("segment_free", 0, 20 * _MiB, 2, None),
    ]
    assert allocator.segments() == []


def test_expandable_segments_map_and_unmap_pages() -> None:
    """With expandable segments a 3 MiB request maps one 20 MiB page; emptying the cache unmaps it."""
    allocator = CachingAllocator(AllocatorConfig(expandable_segments=True), record=True)
    allocator.malloc(1, 3 * _MiB)
    allocator.free(1)
    allocator.empty_cache()
    assert allocator.history is not None
    assert [(e.action, e.size) for e in allocator.history] == [
        ("segment_map", 20 * _MiB),
        ("alloc", 3 * _MiB),
        ("free_requested", 3 * _MiB),
        ("free_completed", 3 * _MiB),
        ("segment_unmap", 20 * _MiB),
    ]


def test_the_segments_list_live_and_cached_blocks_tiling_each_segment() -> None:
    """Two 600 KiB blocks share one small segment; freeing the first leaves it cached, the rest stays free."""
    allocator = CachingAllocator(record=True)
    allocator.malloc(1, 600 << 10)
    allocator.malloc(2, 600 << 10)
    allocator.free(1)
    (segment,) = allocator.segments()
    assert segment.small and segment.size == 2 * _MiB and not segment.expandable
    assert [(address - segment.address, size, key) for address, size, key in segment.blocks] == [
        (0, 600 << 10, None),
        (600 << 10, 600 << 10, 2),
        (1200 << 10, (2048 - 1200) << 10, None),
    ]


@pytest.mark.parametrize("expandable", [False, True])
def test_a_random_replay_sums_to_the_allocators_own_peaks(expandable: bool) -> None:
    """Summing the history's blocks and segments gives max_memory_allocated and max_memory_reserved to the
    byte, and the segments at the end tile exactly and hold exactly the live storages."""
    rng = random.Random(25)
    allocator = CachingAllocator(AllocatorConfig(expandable_segments=expandable), record=True)
    live: list[int] = []
    for key in range(3000):
        if live and rng.random() < 0.45:
            allocator.free(live.pop(rng.randrange(len(live))))
        else:
            allocator.malloc(key, rng.choice([rng.randrange(1, 1 << 20), rng.randrange(1 << 20, 64 << 20)]))
            live.append(key)
        if key % 700 == 699:
            allocator.empty_cache()
    stats = allocator.stats()
    assert allocator.history is not None
    assert _peaks(allocator.history) == (stats.peak_allocated_bytes, stats.peak_reserved_bytes)
    segments = allocator.segments()
    assert sum(segment.size for segment in segments) == stats.final_reserved_bytes
    for segment in segments:
        assert segment.blocks[0][0] == segment.address
        assert all(a + s == b for (a, s, _), (b, _, _) in zip(segment.blocks, segment.blocks[1:], strict=False))
        assert sum(size for _, size, _ in segment.blocks) == segment.size
    held = sorted(key for segment in segments for _, _, key in segment.blocks if key is not None)
    assert held == sorted(live)
