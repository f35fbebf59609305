"""``vramsim serve --quantization``: vLLM's GPTQ / AWQ (Marlin) and bitsandbytes weights, per tensor-parallel rank."""

from __future__ import annotations

import pytest
import torch
import transformers

from vramsim.cli import main
from vramsim.estimators.devices import get_device
from vramsim.serving.budget import serve

BF16 = 2


def _rounded(nbytes: int) -> int:
    return -(-nbytes // 512) * 512  # the caching allocator's 512-B blocks


CONFIG = transformers.LlamaConfig(
    vocab_size=1024,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    dtype=torch.bfloat16,
)
"""A small Llama whose shards under tensor parallel 2 still fit Marlin (out a multiple of 64, in of 128)."""
SMALL = {"max_model_len": 256, "max_num_batched_tokens": 256, "max_num_seqs": 16, "enforce_eager": True, "tp": 2}


@pytest.fixture(scope="module")
def plain() -> object:
    return serve(CONFIG, **SMALL)


def _rank_linears(tp: int) -> list[tuple[int, int]]:
    """(in, out) of every decoder linear layer one rank holds under tensor parallel ``tp``."""
    config = CONFIG
    hidden, inter = config.hidden_size, config.intermediate_size // tp
    q, kv = config.num_attention_heads // tp * config.head_dim, config.num_key_value_heads // tp * config.head_dim
    per_layer = [(hidden, q), (hidden, kv), (hidden, kv), (q, hidden), (hidden, inter), (hidden, inter), (inter, hidden)]
    return per_layer * config.num_hidden_layers


def test_gptq_and_awq_weights_are_each_ranks_packed_shards(plain: object) -> None:
    """GPTQ 4-bit, groups of 128, on the Marlin kernel: each decoder linear's bf16 weight becomes an int32 qweight of
    in x out / 8 words, bf16 scales [in / 128, out] and an int32 workspace of max(SMs, 128); AWQ adds packed zeros
    [in / 128, out / 8] int32. Tensor parallel 2: each rank packs its own shard (the embedding and norms stay bf16)."""
    gptq, awq = serve(CONFIG, **SMALL, quantization="gptq"), serve(CONFIG, **SMALL, quantization="awq")
    workspace = _rounded(max(get_device("h100").multiprocessors, 128) * 4)
    linears = _rank_linears(2)
    dense = sum(_rounded(i * o * BF16) for i, o in linears)
    packed = sum(_rounded(i * o // 2) + _rounded(i // 128 * o * BF16) + workspace for i, o in linears)
    assert plain.weights_bytes - gptq.weights_bytes == dense - packed  # type: ignore[attr-defined]
    assert awq.weights_bytes - gptq.weights_bytes == sum(_rounded(i // 128 * o // 8 * 4) for i, o in linears)
    # the Marlin GEMMs' fp32 reduce buffers raise the profile peak of this small model, which logits dominate no more
    extra = gptq.activation_peak_bytes - plain.activation_peak_bytes  # type: ignore[attr-defined]
    assert extra > 0
    assert gptq.kv_cache_bytes - plain.kv_cache_bytes == dense - packed - extra  # type: ignore[attr-defined]


def test_bitsandbytes_weights_are_nf4_shards(plain: object) -> None:
    """vLLM's in-flight NF4 on each rank's shard: half a byte per linear weight plus its double-quantized absmax."""
    nf4 = serve(CONFIG, **SMALL, quantization="bitsandbytes")
    linears = _rank_linears(2)
    dense = sum(i * o * BF16 for i, o in linears)
    saved = plain.weights_bytes - nf4.weights_bytes  # type: ignore[attr-defined]
    # 1.5 B of 2 saved per element, less a 1-B absmax per 64 and the quant state's small tensors (under 8 per layer,
    # each rounded to a 512-B block); TP 2 already halved dense, so these bound one rank's shard
    assert dense * 3 // 4 - dense // 64 - len(linears) * 8 * 512 < saved < dense * 3 // 4


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["--quantization", "nf4"], "quantization 'nf4' is not one vLLM serves", 2),  # a bad argument
        (["--quantization", "gptq", "--device", "t4"], "vLLM serves GPTQ with its Marlin kernel", 1),
    ],
)
def test_formats_vllm_does_not_serve_are_one_line(
    argv: list[str], message: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "meta-llama/Llama-3.2-1B", *argv]) == status
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
