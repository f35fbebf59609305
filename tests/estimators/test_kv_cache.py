"""Bytes per token from cache samples, and the vLLM/SGLang budget arithmetic (no torch)."""

from __future__ import annotations

import pytest

from vramsim.estimators import serving
from vramsim.estimators.kv_cache import CacheSample, CacheTensor, layers_from_samples


def _sample(tokens: int, kept: int, *, layer: int = 0, state: int = 0, cross: bool = False) -> CacheSample:
    """Keys and values of shape (1, 2 heads, kept tokens, 8) in bf16, plus an optional fp32 state."""
    kv = tuple(CacheTensor(shape=(1, 2, kept, 8), dtype="bfloat16", nbytes=2 * 8 * kept * 2) for _ in range(2))
    extra = (CacheTensor(shape=(state,), dtype="float32", nbytes=4 * state),) if state else ()
    index = (CacheTensor(shape=(), dtype="int64", nbytes=8),)  # bookkeeping, not cache data
    return CacheSample(layer=layer, cross=cross, cache_class="X", tokens=tokens, tensors=kv + extra + index)


def test_full_layer_grows_by_keys_and_values_per_token() -> None:
    """A full layer's bytes per token are 2 x heads x head_dim x element bytes."""
    (layer,) = layers_from_samples([_sample(t, t) for t in (17, 33, 1000)])
    assert (layer.kind, layer.bytes_per_token, layer.window) == ("full", 2 * 2 * 8 * 2, None)


def test_sliding_layer_window_is_measured() -> None:
    """A layer that stops growing keeps the measured number of tokens."""
    (layer,) = layers_from_samples([_sample(t, min(t, 63)) for t in (17, 33, 1000)])
    assert (layer.kind, layer.window) == ("sliding", 63)


def test_state_layer_and_cross_layer() -> None:
    """Bytes that never grow are state; a cross layer counts bytes per encoder token."""
    state = layers_from_samples(
        [
            CacheSample(
                layer=0,
                cross=False,
                cache_class="S",
                tokens=t,
                tensors=(CacheTensor(shape=(1, 64), dtype="float32", nbytes=256),),
            )
            for t in (17, 33, 99)
        ]
    )
    assert (state[0].kind, state[0].state_bytes, state[0].bytes_per_token) == ("state", 256, 0)
    (cross,) = layers_from_samples([_sample(1500, 1500, cross=True)])
    assert (cross.kind, cross.bytes_per_token) == ("cross", 64)


def test_uneven_growth_is_refused() -> None:
    with pytest.raises(ValueError, match="whole number"):
        layers_from_samples([_sample(17, 17), _sample(20, 18), _sample(99, 99)])


def _inputs(layers: list, **changes: object) -> serving.BudgetInputs:
    values: dict = dict(
        total_bytes=80 << 30,
        utilization=0.9,
        weights_bytes=16 << 30,
        activation_peak_bytes=2 << 30,
        non_torch_bytes=0,
        cuda_graph_bytes=0,
        context_bytes=512 << 20,
        layers=layers,
        kv_element_bytes=None,
        block_size=16,
        max_model_len=8192,
        max_num_batched_tokens=8192,
    )
    return serving.BudgetInputs(**(values | changes))


def test_vllm_budget_is_usable_minus_weights_activations_in_whole_blocks() -> None:
    """KV bytes = total x utilization - weights - activation peak; tokens = blocks x 16."""
    layers = layers_from_samples([_sample(t, t, layer=i) for i in range(4) for t in (17, 33, 1000)])
    budget = serving.vllm_budget(_inputs(layers))
    kv = int((80 << 30) * 0.9) - (18 << 30)
    assert budget.kv_cache_bytes == kv
    assert budget.block_bytes == 16 * 4 * 64
    assert budget.kv_blocks == kv // budget.block_bytes and budget.kv_cache_tokens == 16 * budget.kv_blocks
    assert budget.max_concurrency == pytest.approx(budget.kv_cache_tokens / 8192)


def test_fp8_cache_doubles_the_tokens() -> None:
    layers = layers_from_samples([_sample(t, t) for t in (17, 33, 1000)])
    bf16, fp8 = serving.vllm_budget(_inputs(layers)), serving.vllm_budget(_inputs(layers, kv_element_bytes=1))
    assert fp8.kv_blocks == 2 * bf16.kv_blocks


def test_sliding_request_needs_its_window_plus_one_step() -> None:
    """vLLM's SlidingWindowSpec: cdiv(window - 1 + max_num_batched_tokens, block) + 1 blocks."""
    (layer,) = layers_from_samples([_sample(t, min(t, 4095)) for t in (17, 33, 9000)])
    need = serving.request_bytes([layer], 32768, element_bytes=None, block_size=16, max_num_batched_tokens=2048)
    assert need == (-(-(4095 + 2048) // 16) + 1) * 16 * layer.bytes_per_token


def test_sglang_token_pool_has_no_blocks_and_no_profile() -> None:
    layers = layers_from_samples([_sample(t, t) for t in (17, 33, 1000)])
    budget = serving.sglang_budget(_inputs(layers, utilization=0.88, activation_peak_bytes=123))
    at_start = (80 << 30) - (512 << 20)
    assert budget.kv_cache_bytes == at_start - (16 << 30) - int(at_start * (1 - 0.88))
    assert budget.kv_cache_tokens == budget.kv_cache_bytes // 64


def _gemma3_like() -> list:
    """62 layers, five sliding (window 1023) to one full: 52 sliding, 10 full, as Gemma-3-27B lays them out."""
    from vramsim.estimators.kv_cache import LayerCache

    def layer(index: int) -> LayerCache:
        full = index % 6 == 5
        return LayerCache(
            layer=index,
            kind="full" if full else "sliding",
            cache_class="X",
            bytes_per_token=4096,
            element_bytes=2,
            window=None if full else 1023,
            state_bytes=0,
            dtype="bfloat16",
            shapes=(),
            model_bytes_per_token=4096,
        )

    return [layer(i) for i in range(62)]


def test_vllm_hybrid_groups_pad_the_sliding_layers_to_groups_of_the_full_ones() -> None:
    """vLLM's _get_kv_cache_groups_uniform_page_size: groups of 10 (the full layers' count), the 52 sliding
    layers in 6 groups with 8 padding layers; blocks = available // page // 10; the log's tokens are blocks // 7
    x 16; a request takes its blocks in the full group plus, in each of the 6 sliding groups, the blocks
    ``request_bytes`` gives a sliding layer (here its whole length: window plus a step's tokens exceeds it)."""
    layers = _gemma3_like()
    hybrid = serving.hybrid_groups(layers, None)
    assert hybrid is not None and (hybrid.group_size, len(hybrid.groups), hybrid.padding_layers) == (10, 7, 8)
    budget = serving.vllm_budget(_inputs(layers))
    page = 16 * 4096
    kv = int((80 << 30) * 0.9) - (18 << 30)
    assert budget.kv_blocks == kv // page // 10
    assert budget.kv_cache_tokens == budget.kv_blocks // 7 * 16
    full_blocks, sliding_blocks = 8192 // 16, min(-(-8192 // 16) + 1, 8192 // 16)
    assert budget.max_concurrency == pytest.approx(budget.kv_blocks / (full_blocks + 6 * sliding_blocks))


def test_one_attention_type_is_one_group() -> None:
    layers = layers_from_samples([_sample(t, t, layer=i) for i in range(4) for t in (17, 33, 1000)])
    assert serving.hybrid_groups(layers, None) is None
