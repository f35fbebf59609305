"""The largest batch size and sequence length that fit: a secant search whose answer is traced."""

from __future__ import annotations

import math

import pytest
import transformers

import vramsim
from vramsim.search.fitting import MAX_TRACES, largest_fit, search


def _measured(f, usable):  # type: ignore[no-untyped-def]
    """``f`` with its verdict against ``usable``, and the values it was called with."""
    calls: list[int] = []

    def measure(x: int) -> tuple[int, bool]:
        calls.append(x)
        return f(x), f(x) <= usable

    return measure, calls


def test_an_affine_peak_is_found_in_four_traces() -> None:
    """Two points give the line, the third is the crossing, the fourth the size after it."""
    measure, calls = _measured(lambda x: 100 + 10 * x, 1000)
    points = search(measure, start=1, bound=10**6, usable=1000)
    assert max(x for x, (_, fits) in points.items() if fits) == 90 and 91 in points
    assert len(calls) == 4 and len(set(calls)) == len(calls)


@pytest.mark.parametrize("start", [1, 7, 300])
def test_a_rounded_convex_peak_is_exact_within_the_budget(start: int) -> None:
    """Allocator-like rounding (2 MiB blocks) and an attention-like square term: the answer is the brute-force one."""

    def f(x: int) -> int:
        return math.ceil((5e8 + 3e7 * x + 2e4 * x * x) / 2**21) * 2**21

    usable = 20 * 2**30
    points = search(_measured(f, usable)[0], start=start, bound=10**6, usable=usable)
    truth = max(x for x in range(1, 2000) if f(x) <= usable)
    assert max(x for x, (_, fits) in points.items() if fits) == truth and truth + 1 in points
    assert len(points) <= MAX_TRACES


def test_the_search_stops_at_its_bounds() -> None:
    everything, _ = _measured(lambda x: x, 10**9)
    assert max(search(everything, start=3, bound=64, usable=10**9)) == 64
    nothing, calls = _measured(lambda x: 10**9 + x, 10**6)
    assert min(search(nothing, start=8, bound=64, usable=10**6)) == 1 and len(calls) <= MAX_TRACES


def test_a_size_that_fits_only_by_emptying_the_cache_is_searched_on() -> None:
    """Past the figure's crossing (bytes 100 + 10 x over 1000 from 91) sizes still fit up to 97: the search
    gallops then bisects to 97 and 98 given the traces, and within its budget never calls a size that fits over."""
    fits_to = 97

    def measure(x: int) -> tuple[int, bool]:
        return 100 + 10 * x, x <= fits_to

    found = search(measure, start=1, bound=10**6, usable=1000, budget=16)
    assert max(x for x, (_, fits) in found.items() if fits) == fits_to and fits_to + 1 in found
    within = search(measure, start=1, bound=10**6, usable=1000)
    assert len(within) == MAX_TRACES and all(fits == (x <= fits_to) for x, (_, fits) in within.items())
    assert max(x for x, (_, fits) in within.items() if fits) > 91


def test_the_largest_fit_is_a_traced_fact(tiny_llama: transformers.LlamaConfig) -> None:
    """The batch found fits, as simulate says, with simulate's figure; the length stops at the model's maximum.

    Regression: at about 1 GB usable, batch 86 at 64 tokens reserves 1,001,193,472 B on the device without a
    limit, past the usable 999,999,999 B, yet runs within it (the allocator empties its cache twice) and trace
    says it fits at 999,096,320 B. The search judged by the unlimited figure and answered 85 ("86 takes
    1,001,193,472 B"); it judges as trace does now."""
    options = dict(seq_len=64, device="h100")
    capacity = vramsim.simulate(tiny_llama, **options).capacity_bytes
    assert capacity is not None
    headroom = 1 - 1_000_000_000 / capacity  # about 1 GB usable: batch ~90 at 64 tokens
    traced = vramsim.simulate(tiny_llama, headroom=headroom, batch_size=86, **options)
    pressure = traced.allocator_pressure
    assert pressure is not None and (pressure.retries, pressure.unlimited_device_bytes) == (2, 1_001_193_472)
    assert (traced.fits, traced.device_bytes) == (True, 999_096_320)
    fit = largest_fit(tiny_llama, headroom=headroom, **options)
    batch = fit.batch_size  # 1, 2, 4, 61, 85 aimed by the secant; 86, 87, 88 fit by emptying the cache
    assert (batch.value, batch.over, batch.exact) == (88, None, False)  # the budget spent before a size over
    at = vramsim.simulate(tiny_llama, headroom=headroom, batch_size=batch.value, **options)
    assert (at.fits, at.device_bytes) == (True, batch.device_bytes) and at.device_bytes <= fit.usable_bytes
    seq = fit.seq_len
    assert (seq.value, seq.bound_by) == (256, "max_position_embeddings")  # rotary: capped, not refused
    assert fit.traces <= 2 * MAX_TRACES - 1  # the given size is shared by both searches


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"task": "generate"}, vramsim.UnsupportedError, "task='generate' has no largest fit"),
        ({"device": "cpu"}, vramsim.ConfigError, "no fixed memory"),
        ({"checkpointing": "all"}, vramsim.ConfigError, "one choice"),
    ],
)
def test_what_the_search_does_not_apply_to_is_one_line(
    options: dict[str, str], error: type[Exception], message: str, tiny_llama: transformers.LlamaConfig
) -> None:
    with pytest.raises(error, match=message):
        largest_fit(tiny_llama, **options)


def test_a_diffusion_pipeline_is_refused() -> None:
    from vramsim import model_zoo

    with pytest.raises(vramsim.UnsupportedError, match="single model"):
        largest_fit(model_zoo.pipeline_ids()[0], task="forward")


# -- the cheapest data-parallel setting ------------------------------------------------------------

_LLAMA_300M = transformers.LlamaConfig(
    hidden_size=2048,
    intermediate_size=5504,
    num_hidden_layers=4,
    num_attention_heads=16,
    num_key_value_heads=16,
    vocab_size=32000,
    max_position_embeddings=4096,
    architectures=["LlamaForCausalLM"],
)
_ASKED = {"gpus": 8, "device": "custom:6GiB:sm_90", "seq_len": 1024, "batch_size": 2}


def test_the_cheapest_strategy_is_the_first_that_fits() -> None:
    """Fewer GPUs before more, less compute lost before more; every cheaper setting measured does not fit (the
    bound rules some out unmeasured); the chosen one's figure from the shared trace equals its own trace."""
    from vramsim.search.strategy import cheapest_strategy

    found = cheapest_strategy(_LLAMA_300M, **_ASKED)
    best = found.cheapest
    assert best is not None and best.gpus > 1  # 4.9 GiB of fp32 AdamW states alone: one 6 GiB GPU cannot hold them
    cheaper = found.candidates[: found.candidates.index(best)]
    assert not any(c.fits for c in cheaper) and all(c.key < best.key for c in cheaper)
    assert len(found.ruled_out) + len(cheaper) > 0, "cheaper settings were weighed: ruled out by the bound or measured"
    assert best.device_bytes <= found.usable_bytes
    alone = vramsim.simulate(_LLAMA_300M, **{**_ASKED, **found.options()})
    assert alone.device_bytes == best.device_bytes
    with pytest.raises(vramsim.ConfigError, match="chooses the layout, scheme and checkpointing itself"):
        cheapest_strategy(_LLAMA_300M, zero=3, **_ASKED)
