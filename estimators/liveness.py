"""Liveness over a timeline: the bytes the device holds after every event.

On a GPU the events go through the caching allocator's model, so each storage occupies its
rounded block and the series is what ``torch.cuda.memory_allocated()`` would read after each
event; on the CPU a storage occupies its own bytes. Peaks, the breakdown at the peak and the
per-layer table all read this one series.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from .allocator import CachingAllocator
from .timeline import Timeline

__all__ = ["OVERHEAD_CATEGORY", "Liveness", "liveness", "replay_under_limit"]

OVERHEAD_CATEGORY = "overheads"
"""Breakdown key of the allocated overheads (the cuBLAS workspace), made before the first step."""

_OVERHEAD_KEY = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Liveness:
    """What the device holds over one timeline."""

    allocated: list[int]
    """Bytes allocated right after each event (rounded blocks on a GPU)."""
    reserved: list[int]
    """Bytes the allocator reserves right after each event (``memory_reserved()``; = ``allocated`` on the CPU),
    allocated overheads included: what a memory timeline draws beside ``allocated``."""
    sizes: list[int]
    """Bytes each block occupies on the device, by key (its rounded block on a GPU)."""
    overhead_bytes: int
    """Allocated overheads held throughout (in ``allocated`` from the first step on)."""
    peak_reserved_bytes: int
    """Highest bytes the allocator reserved over the last step (= allocated peak on the CPU)."""

    def peak(self, first: int, last: int) -> tuple[int, int]:
        """``(bytes, event index)`` of the highest point over events ``first..last``; the earliest wins."""
        window = self.allocated[first : last + 1]
        best = max(range(len(window)), key=window.__getitem__)
        return window[best], first + best

    def breakdown(self, timeline: Timeline, index: int) -> dict[str, int]:
        """Bytes by category of the blocks live right after event ``index``; sums to ``allocated[index]``."""
        live: dict[int, None] = {}
        for key, is_alloc in timeline.events[: index + 1]:
            if is_alloc:
                live[key] = None
            else:
                del live[key]
        totals: dict[str, int] = defaultdict(int)
        for key in live:
            totals[timeline.blocks[key].category] += self.sizes[key]
        if self.overhead_bytes and index >= timeline.preexisting:
            totals[OVERHEAD_CATEGORY] += self.overhead_bytes
        return dict(totals)


def liveness(
    timeline: Timeline,
    allocator: CachingAllocator | None = None,
    *,
    overhead_bytes: int = 0,
    cache_releases: frozenset[int] = frozenset(),
    nbytes: list[int] | None = None,
) -> Liveness:
    """Replay ``timeline`` (through ``allocator`` on a GPU), resetting peaks where the last step begins.

    ``overhead_bytes`` are allocated once what existed before tracing is in place, as the
    cuBLAS workspace is at the first matmul, before any activation. The allocator empties its
    cache right before each event in ``cache_releases`` (``torch.cuda.empty_cache()``). ``nbytes``: each
    block's bytes by key, in place of the blocks' own (a sweep's point of a timeline already derived).
    """
    sizes = _sizes(timeline, nbytes)
    allocated: list[int] = []
    reserved: list[int] = []
    last_step_first = timeline.steps[-1][0] if timeline.steps else 0
    if allocator is None:
        total = 0
        for index, (key, is_alloc) in enumerate(timeline.events):
            if index == timeline.preexisting:
                total += overhead_bytes
            total += sizes[key] if is_alloc else -sizes[key]
            allocated.append(total)
        reserved = allocated
    else:
        for first, last in _stretches(timeline, last_step_first, cache_releases):
            if first == timeline.preexisting and overhead_bytes:
                allocator.malloc(_OVERHEAD_KEY, overhead_bytes)
            if first == last_step_first:
                allocator.reset_peak_stats()
            if first in cache_releases:
                allocator.empty_cache()
            allocator.replay(timeline.events[first:last], sizes, allocated, reserved)
    last_step = allocated[last_step_first:]
    peak_reserved = allocator.stats().peak_reserved_bytes if allocator is not None else max(last_step, default=0)
    return Liveness(
        allocated=allocated, reserved=reserved, sizes=sizes, overhead_bytes=overhead_bytes, peak_reserved_bytes=peak_reserved
    )


def _sizes(timeline: Timeline, nbytes: list[int] | None) -> list[int]:
    """Each block's bytes by key, a list of its own (the replay writes each allocation's block bytes into it)."""
    if nbytes is None:
        return [block.nbytes for block in timeline.blocks]
    if len(nbytes) != len(timeline.blocks):
        raise ValueError(f"{len(nbytes)} sizes for a timeline of {len(timeline.blocks)} blocks")
    return list(nbytes)


def _stretches(timeline: Timeline, last_step_first: int, cache_releases: frozenset[int]) -> list[tuple[int, int]]:
    """``(first, last)``: the event ranges between the moments a replay does something besides the events (the
    overheads allocated, the peaks reset, the cache emptied), each range starting at one of them."""
    cuts = sorted({0, len(timeline.events), timeline.preexisting, last_step_first, *cache_releases})
    return list(pairwise(cuts))


def replay_under_limit(
    timeline: Timeline,
    allocator: CachingAllocator,
    *,
    overhead_bytes: int = 0,
    cache_releases: frozenset[int] = frozenset(),
    nbytes: list[int] | None = None,
) -> int | None:
    """Replay ``timeline`` through ``allocator`` (given a memory limit) until an allocation fails even
    after the cache is emptied (``num_alloc_retries`` counts those retries); the failing event's index,
    or ``None`` when the whole timeline runs. ``cache_releases`` and ``nbytes``: as in ``liveness``; as there,
    peaks restart where the last step begins."""
    sizes = _sizes(timeline, nbytes)
    last_step_first = timeline.steps[-1][0] if timeline.steps else 0
    counters: list[int] = []
    for first, last in _stretches(timeline, last_step_first, cache_releases):
        if first == timeline.preexisting and overhead_bytes and not allocator.malloc(_OVERHEAD_KEY, overhead_bytes):
            return first
        if first == last_step_first:
            allocator.reset_peak_stats()
        if first in cache_releases:
            allocator.empty_cache()
        failed = allocator.replay(timeline.events[first:last], sizes, counters, counters)
        if failed is not None:
            return first + failed
    return None


def backward_starts(timeline: Timeline, steps: Callable[[int], bool]) -> frozenset[int]:
    """The first allocation of each backward pass in the steps ``steps(index)`` accepts: where the HF Trainer's
    ``torch_empty_cache_steps`` empties the cache, after ``compute_loss`` and before ``backward``. Frees are
    left out (a saved activation is freed in backward but was made in forward), and so are recomputations."""
    starts = []
    previous = ""
    for index, (key, is_alloc) in enumerate(timeline.events):
        if not is_alloc:
            continue
        block = timeline.blocks[key]
        if block.phase == "backward" and previous == "forward" and steps(block.step):
            starts.append(index)
        if block.phase in ("forward", "backward", "optimizer"):
            previous = block.phase
    return frozenset(starts)
