"""Quantized weights: bitsandbytes' storage to the byte, its kernels per target, and the options' errors."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig

import vramsim
from vramsim import count_parameters, simulate
from vramsim.analysis.traced import build_and_trace
from vramsim.cli import main
from vramsim.config import SimulationConfig
from vramsim.workload.targets import resolve_target

_LINEARS = [(64, 64), (32, 64), (32, 64), (64, 64), (128, 64), (128, 64), (64, 128)]
"""(out, in) of a decoder layer's q, k, v, o, gate, up and down projections in ``_llama()``."""


def _llama() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=128,
        max_position_embeddings=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        architectures=["LlamaForCausalLM"],
    )


def _nf4_bytes(out_features: int, in_features: int, *, double_quant: bool) -> int:
    """bitsandbytes' 4-bit format (functional.quantize_4bit): two values a byte, one absmax per block
    of 64 (float32, or uint8 quantized again in blocks of 256 with a float32 absmax each and a float32
    offset, and its own copy of the 256-entry float32 codebook), the 16-entry float32 code."""
    values = out_features * in_features
    blocks = math.ceil(values / 64)
    absmax = blocks + 4 * math.ceil(blocks / 256) + 4 + 256 * 4 if double_quant else 4 * blocks
    return math.ceil(values / 2) + absmax + 16 * 4


@pytest.mark.parametrize("double_quant", [False, True])
def test_nf4_layer_storage_is_the_bitsandbytes_format_to_the_byte(double_quant: bool) -> None:
    spec = "nf4-dq" if double_quant else "nf4"
    report = simulate(_llama(), task="forward", quantization=spec, dtype="bf16", batch_size=1, seq_len=8)
    layer = next(row for row in report.layers if row.module == "model.layers.0")
    norms = 2 * 64 * 2  # input and post-attention RMSNorm weights, bf16, left unquantized
    assert layer.parameter_bytes == sum(_nf4_bytes(*s, double_quant=double_quant) for s in _LINEARS) + norms
    assert report.parameters == count_parameters(_llama())  # counted as the values they stand for


def test_int8_layer_storage_is_llm_int8s_format_to_the_byte() -> None:
    """bitsandbytes' Int8Params: the weight's int8 rows and one float32 scale per output row."""
    report = simulate(_llama(), task="forward", quantization="int8", dtype="fp16", batch_size=1, seq_len=8)
    layer = next(row for row in report.layers if row.module == "model.layers.0")
    norms = 2 * 64 * 2
    assert layer.parameter_bytes == sum(out * inp + 4 * out for out, inp in _LINEARS) + norms
    assert {"quantized_weights", "llm_int8_outliers"} <= {a.name for a in report.assumptions}


def _ops(config: SimulationConfig) -> list[str]:
    _, _, trace = build_and_trace(_llama(), config, resolve_target(config.device), checkpointing="applied")
    return [op.name for op in trace.ops]


def test_cuda_fuses_small_matmuls_and_dequantizes_large_ones() -> None:
    """bitsandbytes' CUDA gemm_4bit: the fused kernel at <= 4 rows, the dequantized weight above."""
    decode = _ops(SimulationConfig(task="forward", quantization="nf4", dtype="bf16", batch_size=1, seq_len=1))
    prefill = _ops(SimulationConfig(task="forward", quantization="nf4", dtype="bf16", batch_size=1, seq_len=64))
    assert "bitsandbytes.gemm_4bit" in decode and "bitsandbytes.dequantize_4bit" not in decode
    assert "bitsandbytes.dequantize_4bit" in prefill and "bitsandbytes.gemm_4bit" not in prefill


def test_qlora_freezes_the_base_and_names_what_it_assumed() -> None:
    report = simulate(_llama(), quantization="nf4", dtype="bf16", lora=4, batch_size=1, seq_len=16)
    assert report.settings["quantization"].startswith("bitsandbytes nf4")
    assert report.settings["weights"] == "float32 (given bfloat16, upcast for k-bit training)"
    names = {a.name for a in report.assumptions}
    assert {"quantized_weights", "gemm_4bit_path", "kbit_training"} <= names
    assert report.breakdown["optimizer_states"] > 0


def test_a_real_cpu_quantization_after_a_simulation_is_unaffected() -> None:
    """bitsandbytes caches its codebook on the first quantization's device; meta must not leak into it."""
    import bitsandbytes as bnb

    simulate(_llama(), task="forward", quantization="nf4-dq", dtype="bf16", batch_size=1, seq_len=8)
    packed, state = bnb.functional.quantize_4bit(torch.randn(64, 64), compress_statistics=True)
    assert packed.device.type == "cpu" and state.state2.code.device.type == "cpu"


@pytest.mark.parametrize(
    ("options", "status", "message"),
    [
        (["--quantization", "q3"], 2, "unknown quantization 'q3'; choose one of: nf4, nf4-dq, fp4, fp4-dq, int8"),
        (["--quantization", "nf4", "--device", "cpu", "--task", "forward"], 1, "4-bit inference on the cpu target"),
    ],
)
def test_the_cli_refuses_in_one_line(options: list[str], status: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad value is a bad argument (2, answered before torch loads); a setting refused once built is an error (1)."""
    assert main(["trace", "meta-llama/Llama-3.2-1B", *options]) == status
    err = capsys.readouterr().err
    assert err.startswith("vramsim: error: ") and err.count("\n") == 1 and message in err


def test_llm_int8_on_the_cpu_target_says_it_is_not_modelled() -> None:
    with pytest.raises(vramsim.UnsupportedError, match=r"LLM.int8 on the cpu target"):
        simulate(_llama(), task="train", quantization="int8", device="cpu", seq_len=8)
