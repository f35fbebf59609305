"""The caching allocator's block arithmetic: sizes, segments, and each pool's best-fit free list.

What ``allocator.py`` replays calls into here: ``round_size`` and ``get_allocation_size``, the blocks
of a segment and their splitting and merging, and the free and unmapped blocks of one pool kept in
the order ``get_free_block`` and ``find_expandable_block`` search them (CUDACachingAllocator.cpp).
"""

from __future__ import annotations

from bisect import bisect_left, insort

__all__ = [
    "ADDRESS_SPACE",
    "KEY_STRIDE",
    "MIN_BLOCK_SIZE",
    "SMALL_SIZE",
    "Block",
    "ExpandableSegment",
    "Pool",
    "allocation_size",
    "cut",
    "insert_free",
    "insert_unmapped",
    "merge",
    "remove_free",
    "remove_unmapped",
    "round_size",
    "split",
    "take_cached",
]

MIN_BLOCK_SIZE = 512
"""``kMinBlockSize``: every size rounds up to a multiple of this (CUDACachingAllocator.cpp)."""
SMALL_SIZE = 1 << 20
"""``kSmallSize``: largest request served by the small pool."""
SMALL_BUFFER = 2 << 20
"""``kSmallBuffer``: small-pool segment size, and the small pool's page with expandable segments."""
LARGE_BUFFER = 20 << 20
"""``kLargeBuffer``: segment for 1-10 MiB requests, and the large pool's page with expandable segments."""
MIN_LARGE_ALLOC = 10 << 20
"""``kMinLargeAlloc``: requests from here on get a segment of their own size."""
ROUND_LARGE = 2 << 20
"""``kRoundLarge``: granularity of those own-size segments."""
ADDRESS_SPACE = 1 << 48
"""Virtual range of one expandable segment (the real one is 1.125 x device memory, never the limit);
also where the first plain segment ends, the next ones lying below it."""
KEY_STRIDE = 1 << 62
"""Free blocks sort by ``size * KEY_STRIDE + address``: size first, then address, as one int."""


class Block:
    """A contiguous range of one segment: allocated, cached free, or (expandable) unmapped."""

    __slots__ = ("allocated", "mapped", "next", "pool", "prev", "ptr", "segment", "size")

    def __init__(self, ptr: int, size: int, pool: Pool, segment: ExpandableSegment | None, *, mapped: bool = True):
        self.ptr = ptr
        self.size = size
        self.pool = pool
        self.segment = segment
        self.mapped = mapped
        self.allocated = False
        self.prev: Block | None = None
        self.next: Block | None = None


class Pool:
    """Free blocks of one size class, sorted for best-fit, plus its unmapped ranges."""

    __slots__ = ("free", "free_keys", "page", "segment", "small", "unmapped", "unmapped_ptrs")

    def __init__(self, *, small: bool) -> None:
        self.small = small
        self.page = SMALL_BUFFER if small else LARGE_BUFFER
        self.free_keys: list[int] = []
        self.free: dict[int, Block] = {}
        self.unmapped_ptrs: list[int] = []
        self.unmapped: dict[int, Block] = {}
        self.segment: ExpandableSegment | None = None


class ExpandableSegment:
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


def round_size(nbytes: int) -> int:
    """``round_size``: up to a multiple of 512 B, at least 512 B."""
    return max(MIN_BLOCK_SIZE, -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE)


def allocation_size(size: int) -> int:
    """``get_allocation_size``: the segment ``cudaMalloc`` gets for a request of ``size``."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def cut(block: Block, size: int, *, mapped: bool) -> Block:
    """Shrink ``block`` to ``size`` bytes; the rest becomes its next neighbour in the segment."""
    rest = Block(block.ptr + size, block.size - size, block.pool, block.segment, mapped=mapped)
    rest.prev, rest.next = block, block.next
    if block.next is not None:
        block.next.prev = rest
    block.next = rest
    block.size = size
    return rest


def insert_free(block: Block) -> None:
    """Put a mapped free block into its pool's best-fit order."""
    key = block.size * KEY_STRIDE + block.ptr
    insort(block.pool.free_keys, key)
    block.pool.free[key] = block


def remove_free(block: Block) -> None:
    """Take a mapped free block out of its pool (before its size or address changes)."""
    pool = block.pool
    key = block.size * KEY_STRIDE + block.ptr
    del pool.free_keys[bisect_left(pool.free_keys, key)]
    del pool.free[key]


def insert_unmapped(block: Block) -> None:
    """Record an unmapped range, kept in address order for ``find_expandable_block``."""
    insort(block.pool.unmapped_ptrs, block.ptr)
    block.pool.unmapped[block.ptr] = block


def remove_unmapped(block: Block) -> None:
    """Forget an unmapped range (before it is mapped or merged)."""
    pool = block.pool
    del pool.unmapped_ptrs[bisect_left(pool.unmapped_ptrs, block.ptr)]
    del pool.unmapped[block.ptr]


def take_cached(pool: Pool, size: int, *, expandable: bool) -> Block | None:
    """``get_free_block``: the best-fitting cached block, taken out of the pool."""
    keys = pool.free_keys
    index = bisect_left(keys, size * KEY_STRIDE)
    if index == len(keys):
        return None
    if expandable:
        # Best fit counts a block at the mapped end by what it can grow to, so a block with an
        # unmapped neighbour loses to the next larger block that has none (get_free_block).
        reach = _reach(pool.free[keys[index]])
        for later in range(index + 1, len(keys)):
            later_reach = _reach(pool.free[keys[later]])
            if later_reach >= reach:
                break
            index, reach = later, later_reach
    block = pool.free.pop(keys[index])
    del keys[index]
    return block


def _reach(block: Block) -> int:
    """``expandable_size``: a block's size plus the unmapped range right after it."""
    after = block.next
    return block.size + (after.size if after is not None and not after.mapped else 0)


def merge(block: Block, other: Block | None) -> None:
    """``try_merge_blocks``: absorb a free neighbour in the same mapped state into ``block``."""
    if other is None or other.allocated or other.mapped != block.mapped:
        return
    if other.mapped:
        remove_free(other)
    else:
        remove_unmapped(other)
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


def split(block: Block, size: int, *, expandable: bool) -> None:
    """``alloc_found_block``: cut ``size`` off the front; the rest goes back to the pool."""
    remaining = block.size - size
    splits = remaining >= MIN_BLOCK_SIZE if block.pool.small or expandable else remaining > SMALL_SIZE
    if not splits:
        return
    insert_free(cut(block, size, mapped=True))
