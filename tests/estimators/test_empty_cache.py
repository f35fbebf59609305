"""The HF Trainer's ``torch_empty_cache_steps``: the cache emptied after the loss, before backward."""

from __future__ import annotations

import pytest

import vramsim
from vramsim.errors import ConfigError
from vramsim.estimators.allocator import CachingAllocator
from vramsim.estimators.liveness import backward_starts, liveness
from vramsim.estimators.timeline import Block, Timeline, order_blocks

_MiB = 1 << 20


def _block(nbytes: int, phase: str, alloc: int, free: int, step: int = 0) -> Block:
    return Block(
        nbytes=nbytes,
        category="activations",
        module="",
        phase=phase,
        op="aten.empty",
        step=step,
        alloc_at=(alloc, 0, 0),
        free_at=(free, 0, 0),
    )


def _step(offset: int, step: int) -> list[Block]:
    """A forward's 100 MiB, freed before backward makes two 60 MiB tensors live together."""
    return [
        _block(100 * _MiB, "forward", offset + 1, offset + 2, step),
        _block(60 * _MiB, "backward", offset + 3, offset + 6, step),
        _block(60 * _MiB, "backward", offset + 4, offset + 5, step),
    ]


def _timeline(steps: int) -> Timeline:
    return order_blocks([b for s in range(steps) for b in _step(6 * s, s)], [(6 * s + 1, 6 * s + 6) for s in range(steps)])


def test_backward_starts_are_the_first_backward_allocations_of_the_chosen_steps() -> None:
    timeline = _timeline(2)
    assert backward_starts(timeline, lambda step: True) == {2, 8}
    assert backward_starts(timeline, lambda step: step % 2 == 0) == {2}


def test_emptying_the_cache_before_backward_gives_the_forward_segment_back() -> None:
    """Kept, the forward's 100 MiB segment serves one 60 MiB tensor and the other needs a new one
    (160 MiB reserved); emptied, the two 60 MiB tensors take 120 MiB."""
    timeline = _timeline(1)
    kept = liveness(timeline, CachingAllocator())
    emptied = liveness(timeline, CachingAllocator(), cache_releases=backward_starts(timeline, lambda step: True))
    assert (kept.peak_reserved_bytes, emptied.peak_reserved_bytes) == (160 * _MiB, 120 * _MiB)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"torch_empty_cache_steps": 0}, "between 1"), ({"torch_empty_cache_steps": 1, "task": "forward"}, "training step")],
)
def test_the_option_is_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        vramsim.simulate("gpt2", seq_len=8, **options)
