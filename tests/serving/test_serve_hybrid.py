"""vLLM's budgets for hybrid attention + Mamba models (page-size unification) and for Whisper (cross-attention blocks)."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from vramsim.cli import main
from vramsim.errors import UnsupportedError
from vramsim.serving.budget import read_kv_cache, serve

BF16 = 2


def _bamba(**changes: object) -> transformers.BambaConfig:
    """A tiny Mamba2 hybrid: layer 1 attends, layers 0, 2, 3 are Mamba2 mixers (2 groups, 8 heads of 16, state 8)."""
    values: dict[str, object] = dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_indices=[1],
        mamba_n_heads=8,
        mamba_d_head=16,
        mamba_n_groups=2,
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=16,
        dtype=torch.bfloat16,
    )
    return transformers.BambaConfig(**(values | changes))


def _mamba2_page(config: transformers.BambaConfig, tp: int = 1) -> int:
    """vLLM's MambaStateShapeCalculator.mamba2_state_shape: conv (d_conv - 1, conv_dim / tp), SSM (heads / tp,
    head_dim, state), in the model's dtype."""
    conv_dim = config.mamba_expand * config.hidden_size + 2 * config.mamba_n_groups * config.mamba_d_state
    conv = (config.mamba_d_conv - 1) * conv_dim // tp
    ssm = config.mamba_n_heads // tp * config.mamba_d_head * config.mamba_d_state
    return (conv + ssm) * BF16


def test_mamba1_and_mamba2_states_are_counted_as_vllm_stores_them() -> None:
    """The traced cache keeps d_conv conv columns (Jamba's SSM state in float32); vLLM keeps d_conv - 1, all in the
    model's dtype (Jamba: Mamba1, Bamba: Mamba2)."""
    jamba = transformers.JambaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        num_experts=2,
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
    )
    state = read_kv_cache(jamba, long_tokens=48, dtype=torch.bfloat16)[0]
    inner = 2 * 64
    # transformers: (batch, inner, d_conv) in bf16 + (batch, inner, state) in fp32
    assert state.state_bytes == 4 * inner * BF16 + inner * 8 * 4
    assert state.engine_state_bytes(BF16) == (3 * inner + inner * 8) * BF16  # vLLM mamba1_state_shape
    bamba = _bamba()
    assert {layer.engine_state_bytes(BF16) for layer in read_kv_cache(bamba, long_tokens=48) if layer.kind == "state"} == {
        _mamba2_page(bamba)
    }


def test_hybrid_mamba_block_size_pages_and_concurrency_follow_vllms_closed_form() -> None:
    """HybridAttentionMambaModelConfig: block = 16 x cdiv(mamba page, 16 x attention bytes per token); the Mamba page
    is padded to block x attention bytes per token; 3 Mamba + 1 attention layers make 4 groups of 1; a request takes
    one page per Mamba group and cdiv(max_model_len, block) in the attention group."""
    config = _bamba()
    report = serve(config, max_model_len=1000, enforce_eager=True)
    per_token = 2 * 2 * 16 * BF16  # 2 KV heads of 16
    block = 16 * math.ceil(_mamba2_page(config) / (16 * per_token))
    assert (report.block_size, block) == (32, 32)  # 3,008-B state over 128 B per token: 24 tokens, rounded up to 32
    page = block * per_token
    assert report.block_bytes == page  # group size 1
    assert report.kv_blocks == report.kv_cache_bytes // page
    assert report.kv_cache_tokens == report.kv_blocks // 4 * block
    assert report.max_concurrency == pytest.approx(report.kv_blocks / (3 + math.ceil(1000 / block)))
    note = next(a for a in report.assumptions if a.name == "mamba_page")
    assert note.bytes == page and f"{100 * (page - _mamba2_page(config)) / _mamba2_page(config):.2f}%" in note.detail


def test_tensor_parallel_splits_the_mamba_state() -> None:
    """vLLM divides the conv channels and SSM heads over the ranks: tp 2 halves the page the attention block must hold."""
    config = _bamba()
    report = serve(config, max_model_len=512, enforce_eager=True, tp=2)
    per_token = 2 * 1 * 16 * BF16  # one KV head per rank
    assert report.block_size == 16 * math.ceil(_mamba2_page(config, tp=2) / (16 * per_token))
    assert report.block_bytes == report.block_size * per_token


def test_whisper_budget_counts_cross_attention_blocks_for_the_encoder_length() -> None:
    """Whisper-small (bundled, float32 checkpoint served in bf16 as vLLM downcasts it): 12 self-attention layers and
    12 cross-attention layers (CrossAttentionSpec) make 2 groups of 12; a request takes cdiv(448, 16) decoder blocks
    plus cdiv(1500, 16) encoder blocks."""
    report = serve("openai/whisper-small", device="h100", max_model_len=448, enforce_eager=True)
    page = 16 * 2 * 12 * 64 * BF16
    assert report.block_bytes == 12 * page
    assert report.kv_blocks == report.kv_cache_bytes // page // 12
    assert report.kv_cache_tokens == report.kv_blocks // 2 * 16
    assert report.max_concurrency == pytest.approx(report.kv_blocks / (28 + 94))
    assert [layer.encoder_tokens for layer in report.layers if layer.kind == "cross"] == [1500] * 12


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["google-t5/t5-base"], "is an encoder-decoder (t5) that vLLM V1 does not serve"),
        (["openai/whisper-small", "--max-model-len", "8192"], "whisper-small's 448 positions (max_target_positions)"),
        (["openai/whisper-small", "--max-model-len", "448", "--engine", "sglang"], "SGLang budgets for encoder-decoders"),
    ],
)
def test_encoder_decoders_vllm_does_not_serve_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("changes", "options", "message"),
    [
        ({"mamba_n_groups": 1}, {"tp": 2}, "does not divide the 1 Mamba groups"),
        ({}, {"engine": "sglang"}, "SGLang's Mamba state pool is not modelled"),
    ],
)
def test_hybrid_budgets_not_modelled_are_refused(changes: dict[str, object], options: dict[str, object], message: str) -> None:
    """vLLM replicates a single Mamba group on every rank; SGLang keeps Mamba state in its own pool: neither is guessed."""
    with pytest.raises(UnsupportedError, match=message):
        serve(_bamba(**changes), max_model_len=256, enforce_eager=True, **options)
