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

Not modelled (their defaults are assumed): ``max_split_size_mb`` (unlimited),
``roundup_power2_divisions`` (off), ``garbage_collection_threshold`` (off), several streams,
``record_stream``, CUDA graph private pools, ``empty_cache`` calls inside the trace.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from vramsim.errors import ConfigError

__all__ = ["AllocEvent", "AllocatorConfig", "AllocatorStats", "CachingAllocator", "simulate"]

_MIN_BLOCK_SIZE = 512
"""``kMinBlockSize``: every size rounds up to a multiple of this (CUDACachingAllocator.cpp)."""
_SMALL_SIZE = 1 << 20
"""``kSmallSize``: largest request served by the small pool."""
_SMALL_BUFFER = 2 << 20
"""``kSmallBuffer``: small-pool segment size, and the small pool's page with expandable segments."""
_LARGE_BUFFER = 20 << 20
"""``kLargeBuffer``: segment for 1-10 MiB requests, and the large pool's page with expandable segments."""
_MIN_LARGE_ALLOC = 10 << 20
"""``kMinLargeAlloc``: requests from here on get a segment of their own size."""
_ROUND_LARGE = 2 << 20
"""``kRoundLarge``: granularity of those own-size segments."""
_ADDRESS_SPACE = 1 << 48
"""Virtual range of one expandable segment (the real one is 1.125 x device memory, never the limit);
also where the first plain segment ends, the next ones lying below it."""
_KEY_STRIDE = 1 << 62
"""Free blocks sort by ``size * _KEY_STRIDE + address``: size first, then address, as one int."""
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


class _Block:
    """A contiguous range of one segment: allocated, cached free, or (expandable) unmapped."""

    __slots__ = ("allocated", "mapped", "next", "pool", "prev", "ptr", "segment", "size")

    def __init__(self, ptr: int, size: int, pool: _Pool, segment: _Expandable | None, *, mapped: bool = True):
        self.ptr = ptr
        self.size = size
        self.pool = pool
        self.segment = segment
        self.mapped = mapped
        self.allocated = False
        self.prev: _Block | None = None
        self.next: _Block | None = None


class _Pool:
    """Free blocks of one size class, sorted for best-fit, plus its unmapped ranges."""

    __slots__ = ("free", "free_keys", "page", "segment", "small", "unmapped", "unmapped_ptrs")

    def __init__(self, *, small: bool) -> None:
        self.small = small
        self.page = _SMALL_BUFFER if small else _LARGE_BUFFER
        self.free_keys: list[int] = []
        self.free: dict[int, _Block] = {}
        self.unmapped_ptrs: list[int] = []
        self.unmapped: dict[int, _Block] = {}
        self.segment: _Expandable | None = None


class _Expandable:
    """One expandable segment: which pages are mapped, and how many contiguous mapped runs."""

    __slots__ = ("base", "page", "pages", "runs")

    def __init__(self, base: int, page: int) -> None:
        self.base = base
        self.page = page
        self.pages = bytearray()
        self.runs = 0

    def mark(self, ptr: int, size: int, *, mapped: bool) -> None:
        """Record pages [ptr, ptr+size) as mapped or unmapped, keeping the run count."""
        first = (ptr - self.base) // self.page
        last = first + size // self.page
        pages = self.pages
        if last > len(pages):
            pages.extend(bytes(last - len(pages)))
        joins = (first > 0 and pages[first - 1]) + (last < len(pages) and pages[last])
        if mapped:
            self.runs += 1 - joins
            pages[first:last] = b"\x01" * (last - first)
        else:
            self.runs += joins - 1
            pages[first:last] = bytes(last - first)


def _cut(block: _Block, size: int, *, mapped: bool) -> _Block:
    """Shrink ``block`` to ``size`` bytes; the rest becomes its next neighbour in the segment."""
    rest = _Block(block.ptr + size, block.size - size, block.pool, block.segment, mapped=mapped)
    rest.prev, rest.next = block, block.next
    if block.next is not None:
        block.next.prev = rest
    block.next = rest
    block.size = size
    return rest


def _round_size(nbytes: int) -> int:
    """``round_size``: up to a multiple of 512 B, at least 512 B."""
    return max(_MIN_BLOCK_SIZE, -(-nbytes // _MIN_BLOCK_SIZE) * _MIN_BLOCK_SIZE)


def _allocation_size(size: int) -> int:
    """``get_allocation_size``: the segment ``cudaMalloc`` gets for a request of ``size``."""
    if size <= _SMALL_SIZE:
        return _SMALL_BUFFER
    if size < _MIN_LARGE_ALLOC:
        return _LARGE_BUFFER
    return -(-size // _ROUND_LARGE) * _ROUND_LARGE


class CachingAllocator:
    """The caching allocator of one device, driven one call at a time; each call is one event."""

    def __init__(self, config: AllocatorConfig | None = None) -> None:
        self.config = config or AllocatorConfig()
        self._expandable = self.config.uses_expandable_segments
        self._limit = self.config.memory_limit_bytes
        self._small = _Pool(small=True)
        self._large = _Pool(small=False)
        self._live: dict[int, _Block | None] = {}
        self._next_ptr = _ADDRESS_SPACE
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

    # -- public driving -------------------------------------------------------------------------

    def malloc(self, key: int, nbytes: int) -> bool:
        """Allocate ``nbytes`` for storage ``key``; False on out-of-memory (``DeviceCachingAllocator::malloc``)."""
        self._event += 1
        if key in self._live:
            raise ConfigError(f"event {self._event}: storage key {key} allocated twice without a free")
        if nbytes == 0:
            self._live[key] = None  # NativeCachingAllocator::allocate skips malloc for size 0
            return True
        size = _round_size(nbytes)
        pool = self._small if size <= _SMALL_SIZE else self._large
        block = self._take_cached(pool, size)
        if block is None:
            block = self._new_block(pool, size)
            if block is None:
                self._release_cached()
                self._retries += 1
                block = self._new_block(pool, size)
                if block is None:
                    self._oom_event = self._event
                    return False
        self._split(block, size)
        block.allocated = True
        self._live[key] = block
        self._allocated += block.size
        if self._allocated > self._peak_allocated:
            self._peak_allocated = self._allocated
            self._peak_allocated_event = self._event
        return True

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: every wholly free segment (or free page) goes back to the device."""
        self._release_cached()

    @property
    def allocated_bytes(self) -> int:
        """``torch.cuda.memory_allocated()``: blocks handed out now."""
        return self._allocated

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
        self._merge(block, block.prev)
        self._merge(block, block.next)
        self._insert_free(block)

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

    # -- pools ----------------------------------------------------------------------------------

    def _insert_free(self, block: _Block) -> None:
        """Put a mapped free block into its pool's best-fit order."""
        key = block.size * _KEY_STRIDE + block.ptr
        insort(block.pool.free_keys, key)
        block.pool.free[key] = block

    def _remove_free(self, block: _Block) -> None:
        """Take a mapped free block out of its pool (before its size or address changes)."""
        pool = block.pool
        key = block.size * _KEY_STRIDE + block.ptr
        del pool.free_keys[bisect_left(pool.free_keys, key)]
        del pool.free[key]

    def _insert_unmapped(self, block: _Block) -> None:
        """Record an unmapped range, kept in address order for ``find_expandable_block``."""
        insort(block.pool.unmapped_ptrs, block.ptr)
        block.pool.unmapped[block.ptr] = block

    def _remove_unmapped(self, block: _Block) -> None:
        """Forget an unmapped range (before it is mapped or merged)."""
        pool = block.pool
        del pool.unmapped_ptrs[bisect_left(pool.unmapped_ptrs, block.ptr)]
        del pool.unmapped[block.ptr]

    def _take_cached(self, pool: _Pool, size: int) -> _Block | None:
        """``get_free_block``: the best-fitting cached block, taken out of the pool."""
        keys = pool.free_keys
        index = bisect_left(keys, size * _KEY_STRIDE)
        if index == len(keys):
            return None
        if self._expandable:
            # Best fit counts a block at the mapped end by what it can grow to, so a block with an
            # unmapped neighbour loses to the next larger block that has none (get_free_block).
            reach = self._reach(pool.free[keys[index]])
            for later in range(index + 1, len(keys)):
                later_reach = self._reach(pool.free[keys[later]])
                if later_reach >= reach:
                    break
                index, reach = later, later_reach
        block = pool.free.pop(keys[index])
        del keys[index]
        return block

    @staticmethod
    def _reach(block: _Block) -> int:
        """``expandable_size``: a block's size plus the unmapped range right after it."""
        after = block.next
        return block.size + (after.size if after is not None and not after.mapped else 0)

    def _merge(self, block: _Block, other: _Block | None) -> None:
        """``try_merge_blocks``: absorb a free neighbour in the same mapped state into ``block``."""
        if other is None or other.allocated or other.mapped != block.mapped:
            return
        if other.mapped:
            self._remove_free(other)
        else:
            self._remove_unmapped(other)
        if other is block.prev:
            block.ptr = other.ptr
            block.prev = other.prev
            if other.prev is not None:
                other.prev.next = block
        else:
            block.next = other.next
            if other.next is not None:
                other.next.prev = block
        block.size += other.size

    def _split(self, block: _Block, size: int) -> None:
        """``alloc_found_block``: cut ``size`` off the front; the rest goes back to the pool."""
        remaining = block.size - size
        split = remaining >= _MIN_BLOCK_SIZE if block.pool.small or self._expandable else remaining > _SMALL_SIZE
        if not split:
            return
        self._insert_free(_cut(block, size, mapped=True))

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

    def _new_block(self, pool: _Pool, size: int) -> _Block | None:
        """``alloc_block``: a fresh segment, or (expandable) newly mapped pages; None if it won't fit."""
        if self._expandable:
            return self._grow_expandable(pool, size)
        nbytes = _allocation_size(size)
        if not self._fits(nbytes):
            return None
        self._next_ptr -= nbytes  # below the segments before it, where cudaMalloc puts it
        block = _Block(self._next_ptr, nbytes, pool, None)
        self._segments += 1
        self._grew(nbytes)
        return block

    def _release_cached(self) -> None:
        """``release_cached_blocks``: give every wholly free segment (or free page) back to the device."""
        for pool in (self._large, self._small):
            for block in list(pool.free.values()):
                if self._expandable:
                    self._unmap(block)
                elif block.prev is None and block.next is None:
                    self._remove_free(block)
                    self._reserved -= block.size
                    self._segments -= 1

    # -- expandable segments --------------------------------------------------------------------

    def _grow_expandable(self, pool: _Pool, size: int) -> _Block | None:
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
        self._remove_free(block)
        return block

    def _expandable_candidate(self, pool: _Pool, size: int) -> _Block:
        """``find_expandable_block``: the lowest free-or-unmapped run of ``size`` bytes."""
        for ptr in pool.unmapped_ptrs:
            start = pool.unmapped[ptr]
            if start.prev is not None and not start.prev.allocated:
                start = start.prev
            room = 0  # has_available_address_space: free or unmapped blocks from start on
            walk: _Block | None = start
            while room < size and walk is not None and not walk.allocated:
                room += walk.size
                walk = walk.next
            if room >= size:
                return start
        segment = _Expandable(self._next_ptr, pool.page)  # the pool's first use: its range is never full
        self._next_ptr += _ADDRESS_SPACE
        pool.segment = segment
        whole = _Block(segment.base, _ADDRESS_SPACE, pool, segment, mapped=False)
        self._insert_unmapped(whole)
        return whole

    def _map(self, block: _Block, nbytes: int) -> bool:
        """``map_block``: back the first ``nbytes`` (rounded up to pages) of an unmapped block."""
        segment = block.segment
        assert segment is not None
        mapped = -(-nbytes // segment.page) * segment.page
        if not self._fits(mapped):
            return False
        self._remove_unmapped(block)
        block.mapped = True
        if mapped < block.size:
            self._insert_unmapped(_cut(block, mapped, mapped=False))
        segment.mark(block.ptr, mapped, mapped=True)
        self._merge(block, block.prev)
        self._merge(block, block.next)
        self._insert_free(block)
        self._segments = self._runs()
        self._grew(mapped)
        return True

    def _unmap(self, block: _Block) -> None:
        """``unmap_block``: release the whole pages inside a free block; partial pages stay mapped."""
        segment = block.segment
        assert segment is not None
        page, base, end = segment.page, segment.base, block.ptr + block.size
        first = base + -(-(block.ptr - base) // page) * page
        last = base + (end - base) // page * page
        if first >= last:
            return
        self._remove_free(block)
        if first > block.ptr:
            before = _Block(block.ptr, first - block.ptr, block.pool, segment)
            before.prev, before.next = block.prev, block
            if block.prev is not None:
                block.prev.next = before
            block.prev = before
            self._insert_free(before)
        if last < end:
            after = _Block(last, end - last, block.pool, segment)
            after.prev, after.next = block, block.next
            if block.next is not None:
                block.next.prev = after
            block.next = after
            self._insert_free(after)
        block.ptr, block.size, block.mapped = first, last - first, False
        segment.mark(first, last - first, mapped=False)
        self._merge(block, block.prev)
        self._merge(block, block.next)
        self._insert_unmapped(block)
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
