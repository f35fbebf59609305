"""``CachingAllocator.replay`` (one loop over a timeline's events, the rules inlined) against one ``malloc``/``free``
call per event: the same blocks, counters, segments and out-of-memory event on sequences that split, merge, make
segments of every size class, empty the cache under a limit and run out."""

from __future__ import annotations

import random

import pytest

from vramsim.errors import ConfigError
from vramsim.estimators.allocator import AllocatorConfig, CachingAllocator

_SIZES = (1, 511, 512, 513, 1 << 20, (1 << 20) + 1, 10 << 20, 3 << 30)


def _events(seed: int, count: int) -> tuple[list[tuple[int, bool]], list[int]]:
    rng = random.Random(seed)
    sizes: list[int] = []
    live: list[int] = []
    events = []
    for _ in range(count):
        if live and rng.random() < 0.45:
            events.append((live.pop(rng.randrange(len(live))), False))
            continue
        bound = rng.choice(_SIZES)
        sizes.append(rng.choice([0, bound, rng.randrange(1, bound + 1)]))
        live.append(len(sizes) - 1)
        events.append((len(sizes) - 1, True))
    return events, sizes


def _by_calls(allocator: CachingAllocator, events: list[tuple[int, bool]], sizes: list[int]) -> tuple[list, int | None]:
    counters = []
    for index, (key, is_alloc) in enumerate(events):
        if not is_alloc:
            allocator.free(key)
        elif allocator.malloc(key, sizes[key]):
            sizes[key] = allocator.block_bytes(key)
        else:
            return counters, index
        counters.append((allocator.allocated_bytes, allocator.reserved_bytes))
    return counters, None


@pytest.mark.parametrize("limit", [None, 64 << 20, 1 << 30, 24 << 30])
def test_the_loop_replays_what_one_call_per_event_does(limit: int | None) -> None:
    ooms = recovered = 0
    for seed in range(40):
        events, sizes = _events(seed, 600)
        config = AllocatorConfig(memory_limit_bytes=limit)
        called, looped = CachingAllocator(config), CachingAllocator(config)
        called_sizes, looped_sizes = list(sizes), list(sizes)
        counters, failed = _by_calls(called, events, called_sizes)
        allocated: list[int] = []
        reserved: list[int] = []
        assert looped.replay(events, looped_sizes, allocated, reserved) == failed
        assert list(zip(allocated, reserved, strict=True)) == counters
        assert looped_sizes == called_sizes
        assert looped.stats() == called.stats()
        assert looped.segments() == called.segments()
        ooms += failed is not None
        recovered += failed is None and called.stats().alloc_retries > 0
    assert (ooms > 0) == (limit is not None)  # every limit here is passed by some run
    assert (recovered > 0) == (limit == 24 << 30)  # where some runs empty the cache and go on


def test_the_loop_refuses_what_malloc_and_free_refuse() -> None:
    with pytest.raises(ConfigError, match="allocated twice"):
        CachingAllocator().replay([(0, True), (0, True)], [10], [], [])
    with pytest.raises(ConfigError, match="not allocated"):
        CachingAllocator().replay([(3, False)], [10, 10, 10, 10], [], [])
