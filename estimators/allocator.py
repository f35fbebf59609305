"""A model of PyTorch's CUDA caching allocator: what ``max_memory_allocated``/``reserved`` would say.

Replays alloc/free events through the rules of c10/cuda/CUDACachingAllocator.cpp
(``DeviceCachingAllocator``), one device, one stream:

- sizes round up to 512 B (``round_size``); ``allocated`` counts the block handed out, so rounding
  and unsplit remainders are in ``max_memory_allocated``;
- requests <= 1 MiB use the small pool, packed into 2 MiB segments; larger ones the large pool,
  where a request < 10 MiB gets a 20 MiB segment and a bigger one its size rounded to 2 MiB
  (``get_pool``, ``get_allocation_size``);
- a free block is reused best-fit: the smallest cached block that fits, lowest address on ties
  (``get_free_block``, ``BlockComparatorSize``), and split when the rest is >= 512 B (small pool)
  or > 1 MiB (large pool) (``should_split``); freed blocks merge with free neighbours of the same
  segment (``free_block``, ``try_merge_blocks``);
- when no cached block fits a new segment is made (``alloc_block``), below the segments made before
  it: cudaMalloc hands out descending addresses (in a whole-run trace on an H200, driver 580, 604 of
  636 new segments lay below the previous one), so on a size tie best fit takes the newest segment;
  replaying that trace's own events, ascending addresses left 4 GiB too little reserved for eager
  attention and 1.7% too much for a 3B training step, descending ones matched both exactly
  (``benchmarks/gpu_validation.py``); under a memory limit a failed
  one first returns every unsplit cached segment to the device and retries (``release_cached_blocks``),
  and reports out-of-memory if that fails too;
- with ``expandable_segments`` each pool maps 2 MiB (small) or 20 MiB (large) pages into one
  growing virtual range instead (``ExpandableSegment``, ``try_allocate_expandable_block``,
  ``map_block``, ``unmap_block``): reserved is the mapped pages, any remainder >= 512 B splits, and
  freeing cache unmaps the whole free pages.

ROCm: the HIP allocator is this same file hipified at build time (``PYTORCH_HIP_ALLOC_CONF`` is
read as an alias), so every rule above holds. The one difference is expandable segments: in
torch 2.13 ``CUDAAllocatorConfig::expandable_segments()`` honours the option only on ROCm >= 7.0
and otherwise warns "expandable_segments not supported on this platform" and uses plain segments
(c10/cuda/CUDAAllocatorConfig.h; HIP support landed in pytorch/pytorch#173330/#177974).

With ``record=True`` the allocator also keeps what ``torch.cuda.memory._record_memory_history()``
records (``history``: ``segment_alloc``/``segment_free``, or ``segment_map``/``segment_unmap`` with
expandable segments, then ``alloc``, ``free_requested``, ``free_completed``; one stream, so a free
completes as it is requested) and ``segments()`` lists what ``torch.cuda.memory._snapshot()`` lists
at the end: each segment (each mapped range, with expandable segments) and its blocks in address order.

Not modelled (their defaults are assumed): ``max_split_size_mb`` (unlimited),
``roundup_power2_divisions`` (off), ``garbage_collection_threshold`` (off), several streams,
``record_stream``, CUDA graph private pools, ``empty_cache`` calls inside the trace.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from vramsim.errors import ConfigError

from .allocator_blocks import (
    ADDRESS_SPACE,
    KEY_STRIDE,
    MIN_BLOCK_SIZE,
    SMALL_SIZE,
    Block,
    ExpandableSegment,
    Pool,
    allocation_size,
    cut,
    insert_free,
    insert_unmapped,
    merge,
    remove_free,
    remove_unmapped,
    round_size,
    split,
    take_cached,
)
from .allocator_history import HistoryEntry, SegmentState, segment_states

__all__ = [
    "AllocEvent",
    "AllocatorConfig",
    "AllocatorStats",
    "CachingAllocator",
    "simulate",
]

_ROCM_EXPANDABLE_MIN = (7, 0)
"""First ROCm release on which PyTorch honours ``expandable_segments`` (CUDAAllocatorConfig.h)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocEvent:
    """One storage made or released by the program, in program order."""

    kind: Literal["alloc", "free"]
    key: int
    """Identifies the storage; its free event carries the same key."""
    nbytes: int
    """Bytes requested (``storage.nbytes()``); ignored on free events."""

    def __post_init__(self) -> None:
        """Reject events no program can produce, before they corrupt a replay."""
        if self.kind not in ("alloc", "free"):
            raise ConfigError(f"AllocEvent kind must be 'alloc' or 'free', got {self.kind!r}")
        if self.nbytes < 0:
            raise ConfigError(f"AllocEvent nbytes must be >= 0, got {self.nbytes} for key {self.key}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatorConfig:
    """The allocator settings a run uses (``PYTORCH_CUDA_ALLOC_CONF`` and the device's capacity)."""

    expandable_segments: bool = False
    """``expandable_segments:True``."""
    memory_limit_bytes: int | None = None
    """Bytes the allocator may reserve (device memory less context, NCCL, other processes); ``None``
    for no limit. A segment or page that would pass it fails like ``cudaMalloc`` would."""
    platform: Literal["cuda", "rocm"] = "cuda"
    rocm_version: tuple[int, int] = _ROCM_EXPANDABLE_MIN
    """ROCm release the PyTorch build targets; only read when ``platform == "rocm"``."""

    def __post_init__(self) -> None:
        """Reject settings no allocator has."""
        if self.platform not in ("cuda", "rocm"):
            raise ConfigError(f"platform must be 'cuda' or 'rocm', got {self.platform!r}")
        if self.memory_limit_bytes is not None and self.memory_limit_bytes <= 0:
            raise ConfigError(f"memory_limit_bytes must be > 0 or None, got {self.memory_limit_bytes}")

    @property
    def uses_expandable_segments(self) -> bool:
        """Whether PyTorch would honour ``expandable_segments`` on this platform."""
        if self.platform == "rocm":
            return self.expandable_segments and self.rocm_version >= _ROCM_EXPANDABLE_MIN
        return self.expandable_segments


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatorStats:
    """What ``torch.cuda.memory_stats()`` would report after the replay."""

    peak_allocated_bytes: int
    """``max_memory_allocated()``: block sizes, rounding included."""
    peak_reserved_bytes: int
    """``max_memory_reserved()``: segments (or mapped pages) held from the device."""
    final_allocated_bytes: int
    final_reserved_bytes: int
    """Reserved at the end, cache included (before any ``empty_cache``)."""
    segments: int
    """Segments held when reserved peaked: ``cudaMalloc`` segments, or with expandable segments the
    contiguous mapped ranges ``torch.cuda.memory_snapshot()`` would list."""
    peak_allocated_event: int | None
    """Index of the event that set the allocated peak; ``None`` if nothing was allocated."""
    peak_reserved_event: int | None
    """Index of the event that set the reserved peak; ``None`` if nothing was reserved."""
    alloc_retries: int
    """Times the cache was emptied to retry an allocation (``num_alloc_retries``)."""
    oom: bool
    oom_event: int | None
    """Index of the allocation that failed; the replay stops there."""
    expandable_segments: bool
    """Whether expandable segments were in effect (see ``AllocatorConfig.uses_expandable_segments``)."""


class CachingAllocator:
    """The caching allocator of one device, driven one call at a time; each call is one event."""

    def __init__(self, config: AllocatorConfig | None = None, *, record: bool = False) -> None:
        """``record``: keep the ``history`` of every action (off, the replay does no more than count)."""
        self.config = config or AllocatorConfig()
        self._expandable = self.config.uses_expandable_segments
        self._limit = self.config.memory_limit_bytes
        self._small = Pool(small=True)
        self._large = Pool(small=False)
        self._live: dict[int, Block | None] = {}
        self._next_ptr = ADDRESS_SPACE
        self._event = -1
        self._allocated = 0
        self._reserved = 0
        self._segments = 0
        self._peak_allocated = 0
        self._peak_reserved = 0
        self._segments_at_peak = 0
        self._peak_allocated_event: int | None = None
        self._peak_reserved_event: int | None = None
        self._retries = 0
        self._oom_event: int | None = None
        self.history: list[HistoryEntry] | None = [] if record else None

    # -- public driving -------------------------------------------------------------------------

    def malloc(self, key: int, nbytes: int) -> bool:
        """Allocate ``nbytes`` for storage ``key``; False on out-of-memory (``DeviceCachingAllocator::malloc``)."""
        self._event += 1
        if key in self._live:
            raise ConfigError(f"event {self._event}: storage key {key} allocated twice without a free")
        if nbytes == 0:
            self._live[key] = None  # NativeCachingAllocator::allocate skips malloc for size 0
            return True
        size = round_size(nbytes)
        pool = self._small if size <= SMALL_SIZE else self._large
        block = take_cached(pool, size, expandable=self._expandable) or self._uncached(pool, size)
        if block is None:
            return False
        split(block, size, expandable=self._expandable)
        block.allocated = True
        self._live[key] = block
        if self.history is not None:
            self.history.append(HistoryEntry("alloc", block.ptr, block.size, self._event, key))
        self._allocated += block.size
        if self._allocated > self._peak_allocated:
            self._peak_allocated = self._allocated
            self._peak_allocated_event = self._event
        return True

    def replay(
        self, events: Sequence[tuple[int, bool]], sizes: list[int], allocated: list[int], reserved: list[int]
    ) -> int | None:
        """Replay ``(key, is_alloc)`` events: ``malloc(key, sizes[key])`` or ``free(key)`` each, the same rules in one
        loop (the replay of a long timeline, once per what-if and sweep point, spends its time in calls). After each
        event its counters go to ``allocated`` and ``reserved``, and an allocation's block bytes to ``sizes[key]``.
        Returns the index into ``events`` of an allocation that fails (the replay stops there), else ``None``."""
        if self._expandable or self.history is not None:
            return self._replay_calls(events, sizes, allocated, reserved)
        live, small, large = self._live, self._small, self._large
        event, total, peak, peak_event = self._event, self._allocated, self._peak_allocated, self._peak_allocated_event
        held = self._reserved
        push_allocated, push_reserved = allocated.append, reserved.append
        try:
            for index, (key, is_alloc) in enumerate(events):
                event += 1
                if is_alloc:
                    if key in live:
                        raise ConfigError(f"event {event}: storage key {key} allocated twice without a free")
                    nbytes = sizes[key]
                    if nbytes == 0:
                        live[key] = None
                    else:
                        size = -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE if nbytes > MIN_BLOCK_SIZE else MIN_BLOCK_SIZE
                        pool = small if size <= SMALL_SIZE else large
                        keys, free = pool.free_keys, pool.free
                        found = bisect_left(keys, size * KEY_STRIDE)
                        if found < len(keys):
                            block = free.pop(keys.pop(found))
                        else:
                            self._event = event
                            fresh = self._uncached(pool, size)
                            if fresh is None:
                                return index
                            block, held = fresh, self._reserved
                        rest = block.size - size
                        if rest >= MIN_BLOCK_SIZE if pool.small else rest > SMALL_SIZE:  # cut, the rest cached
                            tail = Block(block.ptr + size, rest, pool, block.segment)
                            tail.prev, tail.next = block, block.next
                            if block.next is not None:
                                block.next.prev = tail
                            block.next, block.size = tail, size
                            cached = rest * KEY_STRIDE + tail.ptr
                            insort(keys, cached)
                            free[cached] = tail
                        block.allocated = True
                        live[key] = block
                        sizes[key] = size = block.size
                        total += size
                        if total > peak:
                            peak, peak_event = total, event
                else:
                    try:
                        freed = live.pop(key)
                    except KeyError:
                        raise ConfigError(f"event {event}: free of storage key {key}, which is not allocated") from None
                    if freed is not None:  # merged with its free neighbours (all mapped), then cached
                        freed.allocated = False
                        total -= freed.size
                        pool = freed.pool
                        keys, free = pool.free_keys, pool.free
                        before, after = freed.prev, freed.next
                        if before is not None and not before.allocated:
                            cached = before.size * KEY_STRIDE + before.ptr
                            del keys[bisect_left(keys, cached)]
                            del free[cached]
                            freed.ptr, freed.prev = before.ptr, before.prev
                            if before.prev is not None:
                                before.prev.next = freed
                            freed.size += before.size
                        if after is not None and not after.allocated:
                            cached = after.size * KEY_STRIDE + after.ptr
                            del keys[bisect_left(keys, cached)]
                            del free[cached]
                            freed.next = after.next
                            if after.next is not None:
                                after.next.prev = freed
                            freed.size += after.size
                        cached = freed.size * KEY_STRIDE + freed.ptr
                        insort(keys, cached)
                        free[cached] = freed
                push_allocated(total)
                push_reserved(held)
        finally:
            self._event, self._allocated, self._peak_allocated, self._peak_allocated_event = event, total, peak, peak_event
        return None

    def _replay_calls(
        self, events: Sequence[tuple[int, bool]], sizes: list[int], allocated: list[int], reserved: list[int]
    ) -> int | None:
        """``replay`` one call per event: with expandable segments or a history to keep."""
        for index, (key, is_alloc) in enumerate(events):
            if not is_alloc:
                self.free(key)
            elif self.malloc(key, sizes[key]):
                sizes[key] = self.block_bytes(key)
            else:
                return index
            allocated.append(self._allocated)
            reserved.append(self._reserved)
        return None

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: every wholly free segment (or free page) goes back to the device."""
        self._release_cached(self._event + 1)

    @property
    def allocated_bytes(self) -> int:
        """``torch.cuda.memory_allocated()``: blocks handed out now."""
        return self._allocated

    @property
    def reserved_bytes(self) -> int:
        """``torch.cuda.memory_reserved()``: segments (or mapped pages) held from the device now."""
        return self._reserved

    def block_bytes(self, key: int) -> int:
        """Bytes of the block storage ``key`` holds (its rounded size, or more where the rest was too small to split)."""
        block = self._live[key]
        return 0 if block is None else block.size

    def reset_peak_stats(self) -> None:
        """``torch.cuda.reset_peak_memory_stats()``: peaks restart from the current counters."""
        self._peak_allocated, self._peak_reserved = self._allocated, self._reserved
        self._segments_at_peak = self._segments

    def free(self, key: int) -> None:
        """Return storage ``key``'s block to the cache (``DeviceCachingAllocator::free``)."""
        self._event += 1
        try:
            block = self._live.pop(key)
        except KeyError:
            raise ConfigError(f"event {self._event}: free of storage key {key}, which is not allocated") from None
        if block is None:
            return
        block.allocated = False
        self._allocated -= block.size
        if self.history is not None:
            for action in ("free_requested", "free_completed"):
                self.history.append(HistoryEntry(action, block.ptr, block.size, self._event, key))
        merge(block, block.prev)
        merge(block, block.next)
        insert_free(block)

    def stats(self) -> AllocatorStats:
        """The counters so far, as ``torch.cuda.memory_stats()`` would report them."""
        return AllocatorStats(
            peak_allocated_bytes=self._peak_allocated,
            peak_reserved_bytes=self._peak_reserved,
            final_allocated_bytes=self._allocated,
            final_reserved_bytes=self._reserved,
            segments=self._segments_at_peak,
            peak_allocated_event=self._peak_allocated_event,
            peak_reserved_event=self._peak_reserved_event,
            alloc_retries=self._retries,
            oom=self._oom_event is not None,
            oom_event=self._oom_event,
            expandable_segments=self._expandable,
        )

    def segments(self) -> list[SegmentState]:
        """The segments held now and their blocks, in address order (``torch.cuda.memory._snapshot()["segments"]``)."""
        cached = [block for pool in (self._small, self._large) for block in pool.free.values()]
        return segment_states(self._live, cached)

    # -- growing and shrinking ------------------------------------------------------------------

    def _fits(self, nbytes: int) -> bool:
        """Whether the device can give ``nbytes`` more (``cudaMalloc``/``cuMemCreate`` succeed)."""
        return self._limit is None or self._reserved + nbytes <= self._limit

    def _grew(self, nbytes: int) -> None:
        """Count ``nbytes`` newly reserved (segments already counted) and keep the reserved peak."""
        self._reserved += nbytes
        if self._reserved > self._peak_reserved:
            self._peak_reserved = self._reserved
            self._peak_reserved_event = self._event
            self._segments_at_peak = self._segments

    def _uncached(self, pool: Pool, size: int) -> Block | None:
        """A block where no cached one fits: a new one, else a new one after emptying the cache (``num_alloc_retries``),
        else ``None``, the current event then out of memory."""
        block = self._new_block(pool, size)
        if block is None:
            self._release_cached(self._event)
            self._retries += 1
            block = self._new_block(pool, size)
            if block is None:
                self._oom_event = self._event
        return block

    def _new_block(self, pool: Pool, size: int) -> Block | None:
        """``alloc_block``: a fresh segment, or (expandable) newly mapped pages; None if it won't fit."""
        if self._expandable:
            return self._grow_expandable(pool, size)
        nbytes = allocation_size(size)
        if not self._fits(nbytes):
            return None
        self._next_ptr -= nbytes  # below the segments before it, where cudaMalloc puts it
        block = Block(self._next_ptr, nbytes, pool, None)
        if self.history is not None:
            self.history.append(HistoryEntry("segment_alloc", block.ptr, nbytes, self._event, None))
        self._segments += 1
        self._grew(nbytes)
        return block

    def _release_cached(self, call: int) -> None:
        """``release_cached_blocks``: give every wholly free segment (or free page) back to the device; ``call``
        is the malloc/free call the history files it under."""
        for pool in (self._large, self._small):
            for block in list(pool.free.values()):
                if self._expandable:
                    self._unmap(block, call)
                elif block.prev is None and block.next is None:
                    if self.history is not None:
                        self.history.append(HistoryEntry("segment_free", block.ptr, block.size, call, None))
                    remove_free(block)
                    self._reserved -= block.size
                    self._segments -= 1

    # -- expandable segments --------------------------------------------------------------------

    def _grow_expandable(self, pool: Pool, size: int) -> Block | None:
        """``try_allocate_expandable_block``: map pages until a free run of ``size`` bytes exists."""
        block = self._expandable_candidate(pool, size)
        if not block.mapped and not self._map(block, min(block.size, size)):
            return None
        while block.size < size:
            after = block.next
            assert after is not None and not after.mapped  # the candidate run ends in unmapped space
            if not self._map(after, min(size - block.size, after.size)):
                return None
            block = after
        remove_free(block)
        return block

    def _expandable_candidate(self, pool: Pool, size: int) -> Block:
        """``find_expandable_block``: the lowest free-or-unmapped run of ``size`` bytes."""
        for ptr in pool.unmapped_ptrs:
            start = pool.unmapped[ptr]
            if start.prev is not None and not start.prev.allocated:
                start = start.prev
            room = 0  # has_available_address_space: free or unmapped blocks from start on
            walk: Block | None = start
            while room < size and walk is not None and not walk.allocated:
                room += walk.size
                walk = walk.next
            if room >= size:
                return start
        segment = ExpandableSegment(self._next_ptr, pool.page)  # the pool's first use: its range is never full
        self._next_ptr += ADDRESS_SPACE
        pool.segment = segment
        whole = Block(segment.base, ADDRESS_SPACE, pool, segment, mapped=False)
        insert_unmapped(whole)
        return whole

    def _map(self, block: Block, nbytes: int) -> bool:
        """``map_block``: back the first ``nbytes`` (rounded up to pages) of an unmapped block."""
        segment = block.segment
        assert segment is not None
        mapped = -(-nbytes // segment.page) * segment.page
        if not self._fits(mapped):
            return False
        if self.history is not None:
            self.history.append(HistoryEntry("segment_map", block.ptr, mapped, self._event, None))
        remove_unmapped(block)
        block.mapped = True
        if mapped < block.size:
            insert_unmapped(cut(block, mapped, mapped=False))
        segment.mark(block.ptr, mapped, mapped=True)
        merge(block, block.prev)
        merge(block, block.next)
        insert_free(block)
        self._segments = self._runs()
        self._grew(mapped)
        return True

    def _unmap(self, block: Block, call: int) -> None:
        """``unmap_block``: release the whole pages inside a free block; partial pages stay mapped."""
        segment = block.segment
        assert segment is not None
        page, base, end = segment.page, segment.base, block.ptr + block.size
        first = base + -(-(block.ptr - base) // page) * page
        last = base + (end - base) // page * page
        if first >= last:
            return
        if self.history is not None:
            self.history.append(HistoryEntry("segment_unmap", first, last - first, call, None))
        remove_free(block)
        if first > block.ptr:
            before = Block(block.ptr, first - block.ptr, block.pool, segment)
            before.prev, before.next = block.prev, block
            if block.prev is not None:
                block.prev.next = before
            block.prev = before
            insert_free(before)
        if last < end:
            after = Block(last, end - last, block.pool, segment)
            after.prev, after.next = block, block.next
            if block.next is not None:
                block.next.prev = after
            block.next = after
            insert_free(after)
        block.ptr, block.size, block.mapped = first, last - first, False
        segment.mark(first, last - first, mapped=False)
        merge(block, block.prev)
        merge(block, block.next)
        insert_unmapped(block)
        self._reserved -= last - first
        self._segments = self._runs()

    def _runs(self) -> int:
        """Contiguous mapped ranges over both pools' expandable segments."""
        return sum(pool.segment.runs for pool in (self._small, self._large) if pool.segment is not None)


def simulate(events: Iterable[AllocEvent], config: AllocatorConfig | None = None) -> AllocatorStats:
    """Replay ``events`` through the caching-allocator model, stopping at the first out-of-memory."""
    allocator = CachingAllocator(config)
    for event in events:
        if event.kind == "free":
            allocator.free(event.key)
        elif not allocator.malloc(event.key, event.nbytes):
            break
    return allocator.stats()
