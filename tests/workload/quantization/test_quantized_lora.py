"""LoRA on GPTQ and AWQ bases, as gptqmodel's trainable layers run under peft's GPTQLoraLinear and AwqLoraLinear."""

from __future__ import annotations

from collections import Counter
from typing import Any

import peft
import pytest
import transformers

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.tracer.graph import build_graph, saved_edges, storage_nodes
from vramsim.workload.quantization.training import AWQ_DEQUANT_ROWS, AwqTrainingLinear, GptqTrainingLinear
from vramsim.workload.targets import resolve_target

_LORA: dict[str, Any] = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "down_proj"]}


def _llama() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=4096,
    )


@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_trainable_parameters_are_peft_s(method: str) -> None:
    """The adapters on the quantized layers count what peft's get_nb_trainable_parameters counts on the same config."""
    report = vramsim.simulate(_llama(), task="train", device="h100", dtype="fp16", seq_len=64, quantization=method, lora=_LORA)
    model = peft.get_peft_model(transformers.AutoModelForCausalLM.from_config(_llama()), peft.LoraConfig(**_LORA))
    assert report.trainable_parameters == model.get_nb_trainable_parameters()[0]


def _traced(method: str, seq_len: int) -> tuple[Any, list[dict[str, Any]], set[int]]:
    config = SimulationConfig.from_options(
        task="train", device="h100", dtype="fp16", seq_len=seq_len, quantization=method, lora=_LORA
    )
    program, _, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    graph = build_graph(trace)
    return program, [attrs for _, attrs in storage_nodes(graph)], {sid for sid, _, _ in saved_edges(graph)}


def _dequantized(program: Any, kind: type) -> dict[str, int]:
    """Each quantized layer's name and the bytes of its whole weight in float16, [in, out]."""
    return {name: m.in_features * m.out_features * 2 for name, m in program.model.named_modules() if isinstance(m, kind)}


def test_gptq_keeps_each_dequantized_weight_for_backward() -> None:
    """Each GPTQ layer's forward dequantizes its whole weight; autograd saves it where the input needs a gradient:
    every layer of the second decoder layer (its input depends on the adapters), and not the first layer's q, k and v
    projections (their input comes from the frozen embeddings)."""
    program, storages, saved = _traced("gptq", 64)
    layers = _dequantized(program, GptqTrainingLinear)
    kept = {(a["module"], a["nbytes"]) for sid, a in enumerate(storages) if sid in saved and a["phase"] == "forward"}
    second = {name: nbytes for name, nbytes in layers.items() if ".layers.1." in name}
    assert second and all((name, nbytes) in kept for name, nbytes in second.items())
    first_qkv = {name: nbytes for name, nbytes in layers.items() if ".layers.0.self_attn." in name and "o_proj" not in name}
    assert len(first_qkv) == 3 and not any((name, nbytes) in kept for name, nbytes in first_qkv.items())


@pytest.mark.parametrize("seq_len", [64, 2 * AWQ_DEQUANT_ROWS])
def test_awq_dequantizes_in_backward_and_above_the_threshold_in_forward(seq_len: int) -> None:
    """AWQ keeps only its packed tensors: backward dequantizes each weight again (where the input needs a gradient);
    forward does only above 1024 rows (below, the fused GEMM's 8 float32 split-K partials)."""
    program, storages, saved = _traced("awq", seq_len)
    layers = _dequantized(program, AwqTrainingLinear)
    made = {(a["module"], a["phase"], a["nbytes"]) for a in storages}
    # The layers whose input needs a gradient: all but the first decoder layer's q, k and v projections.
    needed = [
        m
        for name, m in program.model.named_modules()
        if isinstance(m, AwqTrainingLinear) and not (".layers.0.self_attn." in name and "o_proj" not in name)
    ]
    dequantized = Counter(
        tuple(a["shape"]) for a in storages if a["phase"] == "backward" and a["step"] == 1 and a["op"] == "aten.new_empty"
    )
    assert len(needed) == 11 and dequantized >= Counter((m.in_features, m.out_features) for m in needed)
    forward = all((name, "forward", nbytes) in made for name, nbytes in layers.items())
    assert forward == (seq_len > AWQ_DEQUANT_ROWS)
    shapes = {(m.in_features, m.out_features) for m in needed}
    assert not any(sid in saved and a["op"] == "aten.new_empty" and tuple(a["shape"]) in shapes for sid, a in enumerate(storages))


def test_full_fine_tuning_of_a_packed_base_is_refused() -> None:
    with pytest.raises(vramsim.UnsupportedError, match="stays frozen"):
        vramsim.simulate(_llama(), task="train", device="h100", dtype="fp16", seq_len=64, quantization="gptq")
