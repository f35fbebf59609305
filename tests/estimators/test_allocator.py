"""The caching-allocator model against outcomes derived by hand from CUDACachingAllocator.cpp."""

from __future__ import annotations

import random

import pytest

from vramsim.errors import ConfigError
from vramsim.estimators.allocator import AllocatorConfig, AllocatorStats, AllocEvent, CachingAllocator, simulate

KiB, MiB = 1 << 10, 1 << 20


def run(*steps: tuple[str, int, int] | tuple[str, int], **config: object) -> AllocatorStats:
    """Replay ``("alloc", key, nbytes)`` / ``("free", key)`` steps."""
    events = [AllocEvent(kind=s[0], key=s[1], nbytes=s[2] if len(s) == 3 else 0) for s in steps]  # type: ignore[arg-type, misc]
    return simulate(events, AllocatorConfig(**config))  # type: ignore[arg-type]


# -- rounding and pools -------------------------------------------------------------------------


def test_tiny_request_rounds_to_512_in_a_2mib_small_segment() -> None:
    stats = run(("alloc", 1, 100))
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.segments) == (512, 2 * MiB, 1)
    assert (stats.peak_allocated_event, stats.peak_reserved_event) == (0, 0)


def test_two_600kib_blocks_share_one_small_segment() -> None:
    stats = run(("alloc", 1, 600 * KiB), ("alloc", 2, 600 * KiB))
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.segments) == (1200 * KiB, 2 * MiB, 1)


def test_mid_size_request_gets_20mib_and_a_second_fits_the_rest() -> None:
    stats = run(("alloc", 1, 5 * MiB), ("alloc", 2, 5 * MiB))
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.segments) == (10 * MiB, 20 * MiB, 1)
    assert stats.peak_reserved_event == 0 and stats.peak_allocated_event == 1


def test_11mib_reserves_12mib_and_the_unsplit_1mib_counts_as_allocated() -> None:
    stats = run(("alloc", 1, 11 * MiB))
    assert stats.peak_reserved_bytes == 12 * MiB
    assert stats.peak_allocated_bytes == 12 * MiB  # remainder 1 MiB is not > 1 MiB: no split


@pytest.mark.parametrize(
    ("nbytes", "reserved", "allocated"),
    [
        (1 * MiB, 2 * MiB, 1 * MiB),
        (1 * MiB + 1, 20 * MiB, 1 * MiB + 512),
        (9 * MiB, 20 * MiB, 9 * MiB),
        (10 * MiB, 10 * MiB, 10 * MiB),
        (19 * MiB + 1, 20 * MiB, 20 * MiB),
        (21 * MiB, 22 * MiB, 22 * MiB),
    ],
)
def test_segment_size_by_request(nbytes: int, reserved: int, allocated: int) -> None:
    stats = run(("alloc", 1, nbytes))
    assert (stats.peak_reserved_bytes, stats.peak_allocated_bytes) == (reserved, allocated)


def test_zero_byte_allocations_take_no_block() -> None:
    stats = run(("alloc", 1, 0), ("alloc", 2, 0), ("free", 1), ("free", 2))
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.segments) == (0, 0, 0)
    assert stats.peak_allocated_event is None and stats.peak_reserved_event is None


# -- reuse, splitting, coalescing -----------------------------------------------------------------


def test_free_then_realloc_reuses_the_cached_block() -> None:
    stats = run(("alloc", 1, 5 * MiB), ("free", 1), ("alloc", 2, 5 * MiB), ("free", 2), ("alloc", 3, 20 * MiB))
    assert stats.peak_reserved_bytes == 20 * MiB
    assert stats.peak_allocated_bytes == 20 * MiB
    assert (stats.final_allocated_bytes, stats.final_reserved_bytes) == (20 * MiB, 20 * MiB)


def test_small_pool_splits_a_remainder_of_exactly_512() -> None:
    stats = run(("alloc", 1, 1 * MiB), ("alloc", 2, 1 * MiB - 512), ("alloc", 3, 100))
    assert stats.peak_reserved_bytes == 2 * MiB  # the third request fits the 512 B remainder
    assert stats.peak_allocated_bytes == 2 * MiB


def test_large_pool_keeps_a_remainder_of_exactly_1mib_attached() -> None:
    stats = run(("alloc", 1, 9 * MiB), ("alloc", 2, 10 * MiB))
    assert stats.peak_reserved_bytes == 20 * MiB
    assert stats.peak_allocated_bytes == 20 * MiB  # 10 MiB took the whole 11 MiB remainder


def test_large_pool_splits_a_remainder_just_over_1mib() -> None:
    stats = run(("alloc", 1, 9 * MiB), ("alloc", 2, 10 * MiB - 512), ("alloc", 3, 1 * MiB + 512))
    assert stats.peak_reserved_bytes == 20 * MiB
    assert stats.peak_allocated_bytes == 20 * MiB
    assert stats.segments == 1


def test_small_and_large_requests_never_share_a_segment() -> None:
    stats = run(("alloc", 1, 5 * MiB), ("alloc", 2, 4 * KiB))
    assert (stats.peak_reserved_bytes, stats.segments) == (22 * MiB, 2)


def test_freed_neighbours_coalesce_into_one_block() -> None:
    steps = [("alloc", k, 5 * MiB) for k in (1, 2, 3)] + [("free", 1), ("free", 2), ("alloc", 4, 9 * MiB)]
    stats = run(*steps)  # 9 MiB fits only the merged 10 MiB of blocks 1 and 2
    assert (stats.peak_reserved_bytes, stats.segments) == (20 * MiB, 1)


def test_best_fit_picks_the_smallest_block_that_fits() -> None:
    stats = run(
        ("alloc", 1, 12 * MiB),
        ("alloc", 2, 16 * MiB),
        ("free", 1),
        ("free", 2),
        ("alloc", 3, 11 * MiB),
        ("alloc", 4, 14 * MiB),
    )
    assert stats.peak_reserved_bytes == 28 * MiB  # 11 MiB takes the 12 MiB block, 14 MiB the 16 MiB one
    assert stats.final_allocated_bytes == 12 * MiB + 14 * MiB  # 1 MiB left on the 12: not split; 2 MiB: split


# -- memory limit ---------------------------------------------------------------------------------


def test_limit_releases_cached_segments_and_retries() -> None:
    steps = [("alloc", 1, 20 * MiB), ("free", 1), ("alloc", 2, 30 * MiB)]
    unlimited = run(*steps)
    limited = run(*steps, memory_limit_bytes=40 * MiB)
    assert (unlimited.peak_reserved_bytes, unlimited.alloc_retries) == (50 * MiB, 0)
    assert (limited.peak_reserved_bytes, limited.final_reserved_bytes, limited.alloc_retries) == (30 * MiB, 30 * MiB, 1)
    assert not limited.oom


def test_limit_reports_oom_at_the_failing_event_and_stops() -> None:
    stats = run(("alloc", 1, 30 * MiB), ("alloc", 2, 12 * MiB), ("alloc", 3, 1 * MiB), memory_limit_bytes=40 * MiB)
    assert stats.oom and stats.oom_event == 1
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.alloc_retries) == (30 * MiB, 30 * MiB, 1)


def test_a_partly_used_segment_cannot_be_released() -> None:
    steps = [("alloc", 1, 5 * MiB), ("alloc", 2, 5 * MiB), ("free", 1), ("alloc", 3, 30 * MiB)]
    stats = run(*steps, memory_limit_bytes=40 * MiB)
    assert stats.oom and stats.oom_event == 3
    assert stats.final_reserved_bytes == 20 * MiB


def test_limit_equal_to_the_unlimited_peak_changes_nothing() -> None:
    events = _random_trace(random.Random(7), 3_000)
    free = simulate(events)
    tight = simulate(events, AllocatorConfig(memory_limit_bytes=free.peak_reserved_bytes))
    assert tight == free
    squeezed = simulate(events, AllocatorConfig(memory_limit_bytes=free.peak_reserved_bytes - 1))
    assert squeezed.oom or squeezed.alloc_retries > 0


# -- expandable segments --------------------------------------------------------------------------


def test_expandable_maps_pages_and_splits_any_remainder() -> None:
    steps = [("alloc", 1, 5 * MiB), ("alloc", 2, 11 * MiB), ("alloc", 3, 11 * MiB)]
    plain = run(*steps)
    grown = run(*steps, expandable_segments=True)
    # Plain: 5 MiB gets a 20 MiB segment, the first 11 MiB its 15 MiB rest, the second a 12 MiB
    # segment it fills whole (1 MiB rest is not split).
    assert (plain.peak_reserved_bytes, plain.peak_allocated_bytes, plain.segments) == (32 * MiB, 28 * MiB, 2)
    # Expandable: same first two; the second 11 MiB grows the 4 MiB end block by one 20 MiB page
    # and is split, so only 11 MiB counts as allocated.
    assert (grown.peak_reserved_bytes, grown.peak_allocated_bytes, grown.segments) == (40 * MiB, 27 * MiB, 1)
    assert grown.expandable_segments and not plain.expandable_segments


def test_expandable_absorbs_growing_requests_in_one_range() -> None:
    steps = [("alloc", 1, 12 * MiB), ("free", 1), ("alloc", 2, 13 * MiB), ("free", 2), ("alloc", 3, 15 * MiB)]
    assert run(*steps).peak_reserved_bytes == (12 + 14 + 16) * MiB  # each size needs a new segment
    assert run(*steps, expandable_segments=True).peak_reserved_bytes == 20 * MiB  # one page holds them all


def test_expandable_small_pool_uses_2mib_pages() -> None:
    stats = run(("alloc", 1, 100), ("alloc", 2, 5 * MiB), expandable_segments=True)
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.segments) == (5 * MiB + 512, 22 * MiB, 2)


def test_expandable_best_fit_spares_the_block_at_the_growing_end() -> None:
    # After the frees, page 0 holds a 6 MiB hole at [0, 6), block 2 at [6, 16) and a 4 MiB end
    # block at [16, 20) next to unmapped space. The 3 MiB request fits both; best fit counts the
    # end block by what it could grow to, so the hole wins. The 5 MiB request then fits neither
    # the 3 MiB left in the hole nor the 4 MiB end, and the end grows by a page.
    steps = [("alloc", 1, 6 * MiB), ("alloc", 2, 10 * MiB), ("free", 1), ("alloc", 3, 3 * MiB), ("alloc", 4, 5 * MiB)]
    stats = run(*steps, expandable_segments=True)
    assert stats.peak_reserved_bytes == 40 * MiB
    assert stats.peak_allocated_bytes == 18 * MiB
    assert stats.peak_reserved_event == 4


def test_expandable_release_unmaps_only_whole_free_pages() -> None:
    # 30 MiB maps pages 0-1; 5 MiB lands at [30, 35). Freeing the 30 MiB frees page 0 whole, while
    # page 1 still holds block 2. The small request needs a 2 MiB page: 40 + 2 > 40, so the cache
    # is released (page 0 unmapped, [20, 30) stays mapped) and the retry maps the small page.
    steps = [("alloc", 1, 30 * MiB), ("alloc", 2, 5 * MiB), ("free", 1), ("alloc", 3, 100)]
    stats = run(*steps, expandable_segments=True, memory_limit_bytes=40 * MiB)
    assert not stats.oom and stats.alloc_retries == 1
    assert stats.final_reserved_bytes == 22 * MiB
    assert stats.final_allocated_bytes == 5 * MiB + 512


def test_expandable_maps_a_released_hole_again() -> None:
    # Continuing the case above: once the small block is freed, 15 MiB fits no mapped block, and
    # the lowest unmapped range with room is the hole at page 0 plus the free [20, 30) after it.
    # Mapping that page needs the small page back (22 + 20 > 40): a second release, then it fits.
    steps = [("alloc", 1, 30 * MiB), ("alloc", 2, 5 * MiB), ("free", 1), ("alloc", 3, 100), ("free", 3), ("alloc", 4, 15 * MiB)]
    stats = run(*steps, expandable_segments=True, memory_limit_bytes=40 * MiB)
    assert not stats.oom and stats.alloc_retries == 2
    assert (stats.final_reserved_bytes, stats.final_allocated_bytes) == (40 * MiB, 20 * MiB)


def test_expandable_oom_when_pages_do_not_fit() -> None:
    stats = run(("alloc", 1, 30 * MiB), ("alloc", 2, 30 * MiB), expandable_segments=True, memory_limit_bytes=50 * MiB)
    assert stats.oom and stats.oom_event == 1
    assert stats.final_reserved_bytes == 40 * MiB


# -- ROCm -----------------------------------------------------------------------------------------


def test_rocm_before_7_ignores_expandable_segments() -> None:
    old = run(("alloc", 1, 11 * MiB), expandable_segments=True, platform="rocm", rocm_version=(6, 4))
    new = run(("alloc", 1, 11 * MiB), expandable_segments=True, platform="rocm", rocm_version=(7, 0))
    assert not old.expandable_segments and (old.peak_reserved_bytes, old.peak_allocated_bytes) == (12 * MiB, 12 * MiB)
    assert new.expandable_segments and (new.peak_reserved_bytes, new.peak_allocated_bytes) == (20 * MiB, 11 * MiB)


# -- inputs ---------------------------------------------------------------------------------------


def test_bad_events_and_configs_raise_config_errors() -> None:
    with pytest.raises(ConfigError, match="'alloc' or 'free'"):
        AllocEvent(kind="malloc", key=1, nbytes=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="-1"):
        AllocEvent(kind="alloc", key=1, nbytes=-1)
    with pytest.raises(ConfigError, match="'cuda' or 'rocm'"):
        AllocatorConfig(platform="xpu")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="memory_limit_bytes"):
        AllocatorConfig(memory_limit_bytes=0)
    with pytest.raises(ConfigError, match="key 1 allocated twice"):
        run(("alloc", 1, 8), ("alloc", 1, 8))
    with pytest.raises(ConfigError, match="event 1: free of storage key 2"):
        run(("alloc", 1, 8), ("free", 2))


# -- cross-check against a plain reference on random traces --------------------------------------


def _random_trace(rng: random.Random, count: int) -> list[AllocEvent]:
    """Allocs of mixed sizes (small, mid, large) freed in random order."""
    live: list[int] = []
    events: list[AllocEvent] = []
    key = 0
    while len(events) < count:
        if live and rng.random() < 0.45:
            events.append(AllocEvent(kind="free", key=live.pop(rng.randrange(len(live))), nbytes=0))
            continue
        size = rng.choice(
            [rng.randint(0, 4 * KiB), rng.randint(1, 1 * MiB), rng.randint(1 * MiB, 12 * MiB), rng.randint(10 * MiB, 64 * MiB)]
        )
        key += 1
        live.append(key)
        events.append(AllocEvent(kind="alloc", key=key, nbytes=size))
    return events


def _reference(events: list[AllocEvent], limit: int | None) -> tuple[int, int, int, bool]:
    """A slow, direct reading of the same rules: segments as address-ordered block lists."""
    segments: list[list[list[int]]] = []  # each block: [address, size, allocated, small]
    where: dict[int, list[int] | None] = {}
    base, allocated, reserved, peak_a, peak_r, retries = 0, 0, 0, 0, 0, 0

    def new_segment(size: int, small: bool) -> list[int] | None:
        nonlocal base, reserved, peak_r
        total = 2 * MiB if small else (20 * MiB if size < 10 * MiB else -(-size // (2 * MiB)) * 2 * MiB)
        if limit is not None and reserved + total > limit:
            return None
        block = [base, total, 0, small]
        segments.append([block])
        base += total
        reserved += total
        peak_r = max(peak_r, reserved)
        return block

    for event in events:
        if event.kind == "free":
            block = where.pop(event.key)
            if block is None:
                continue
            block[2] = 0
            allocated -= block[1]
            segment = next(s for s in segments if block in s)
            merged: list[list[int]] = []
            for item in segment:
                if merged and not merged[-1][2] and not item[2]:
                    merged[-1][1] += item[1]
                else:
                    merged.append(item)
            segment[:] = merged
            continue
        if event.nbytes == 0:
            where[event.key] = None
            continue
        size = max(512, -(-event.nbytes // 512) * 512)
        small = size <= 1 * MiB
        fits = [b for s in segments for b in s if not b[2] and b[3] == small and b[1] >= size]
        block = min(fits, key=lambda b: (b[1], b[0])) if fits else new_segment(size, small)
        if block is None:
            segments[:] = [s for s in segments if len(s) > 1 or s[0][2]]
            reserved = sum(b[1] for s in segments for b in s)
            retries += 1
            block = new_segment(size, small)
            if block is None:
                return peak_a, peak_r, retries, True
        rest = block[1] - size
        if rest >= 512 if small else rest > 1 * MiB:
            segment = next(s for s in segments if block in s)
            segment.insert(segment.index(block) + 1, [block[0] + size, rest, 0, small])
            block[1] = size
        block[2] = 1
        where[event.key] = block
        allocated += block[1]
        peak_a = max(peak_a, allocated)
    return peak_a, peak_r, retries, False


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("limit_fraction", [None, 0.7])
def test_matches_a_plain_reference_on_random_traces(seed: int, limit_fraction: float | None) -> None:
    events = _random_trace(random.Random(seed), 1_500)
    limit = None if limit_fraction is None else int(simulate(events).peak_reserved_bytes * limit_fraction)
    stats = simulate(events, AllocatorConfig(memory_limit_bytes=limit))
    assert (stats.peak_allocated_bytes, stats.peak_reserved_bytes, stats.alloc_retries, stats.oom) == _reference(events, limit)


def test_counters_balance_after_everything_is_freed() -> None:
    for expandable in (False, True):
        allocator = CachingAllocator(AllocatorConfig(expandable_segments=expandable))
        events = _random_trace(random.Random(11), 4_000)
        live = set()
        for event in events:
            if event.kind == "alloc":
                assert allocator.malloc(event.key, event.nbytes)
                live.add(event.key)
            else:
                allocator.free(event.key)
                live.discard(event.key)
        for key in live:
            allocator.free(key)
        stats = allocator.stats()
        assert stats.final_allocated_bytes == 0
        assert 0 < stats.peak_allocated_bytes <= stats.peak_reserved_bytes == stats.final_reserved_bytes
