"""A training job's duration from its traced FLOPs: the step's FLOPs equal torch's own FlopCounterMode on a real CPU
run of the same model (with checkpointing's recompute too), are 6 x parameters x tokens for a dense decoder at short
sequence, and the duration is those FLOPs over the GPUs' peak times the stated utilisation."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import torch
import transformers
from rich.console import Console
from torch.utils.flop_counter import FlopCounterMode

from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import MODEL_FLOPS_UTILISATION
from vramsim.estimators.checkpointing import what_if
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.pricing import load_sheet, parse_sheet, quote, step_flops, training_duration
from vramsim.results.quote import StepFlops
from vramsim.tracer.graph import build_graph
from vramsim.views.quote import render_quote
from vramsim.workload.targets import resolve_target

BATCH, SEQ = 2, 16
EXAMPLE = Path(__file__).parents[2] / "examples" / "prices.example.toml"


def _llama() -> transformers.LlamaConfig:
    """Wide enough that matmuls dominate and a 16-token sequence keeps attention near 1% of the FLOPs."""
    return transformers.LlamaConfig(
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        max_position_embeddings=64,
    )


@cache
def traced(checkpointing: str = "none", applied: bool = False) -> StepFlops:
    """The last traced step's FLOPs: marked blocks and the what-if's recompute, or the checkpointing applied."""
    options = {"task": "train", "batch_size": BATCH, "seq_len": SEQ, "device": "cpu", "dtype": "float32"}
    config = SimulationConfig(**options, attn_implementation="eager", checkpointing=checkpointing if applied else "none")
    _, _, trace = build_and_trace(_llama(), config, resolve_target("cpu"), checkpointing="applied" if applied else "marked")
    graph = build_graph(trace)
    cost = what_if(graph, parse_checkpointing(checkpointing)).cost if checkpointing != "none" and not applied else None
    return step_flops(graph, BATCH * SEQ, recompute=cost)


def real_flops(*, checkpointed: bool) -> int:
    """FlopCounterMode's count of one real forward and backward on the CPU."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM._from_config(_llama(), attn_implementation="eager")
    model.train()
    if checkpointed:
        model.gradient_checkpointing_enable()
    ids = torch.randint(0, 500, (BATCH, SEQ))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return counter.get_total_flops()


def test_step_flops_equal_flop_counter_on_a_real_run() -> None:
    step = traced()
    assert step.recompute == 0 and step.backward == 2 * step.forward
    assert step.total == real_flops(checkpointed=False)


def test_recompute_of_a_what_if_equals_the_applied_checkpointing_and_a_real_run() -> None:
    """The trace holds no recompute (checkpointing is marked, then a what-if); its cost per step is the recompute an
    applied trace records, and forward + backward + recompute is what torch counts with checkpointing on."""
    what_if_step, applied = traced("full"), traced("full", applied=True)
    assert what_if_step.recompute == applied.recompute > 0
    assert what_if_step.recompute == what_if_step.forward - _not_recomputed_flops()
    assert what_if_step.total == applied.total == real_flops(checkpointed=True)


def _not_recomputed_flops() -> int:
    """Forward FLOPs no replay runs: the head's matmul, outside the layers (the embedding is a lookup, 0 FLOPs), and
    each layer's down projection, whose output backward does not need (torch's checkpoint stops its replay once it
    has every saved tensor: early stop, the non-reentrant default)."""
    head = 2 * BATCH * SEQ * 256 * 500
    down_projections = 2 * (2 * BATCH * SEQ * 688 * 256)
    return head + down_projections


def test_six_times_parameters_times_tokens() -> None:
    """6 x N x tokens with N the parameters a matmul reads (the input embedding is a lookup, no FLOPs)."""
    model = transformers.LlamaForCausalLM._from_config(_llama())
    params = sum(p.numel() for p in model.parameters()) - model.model.embed_tokens.weight.numel()
    assert traced().total / (6 * params * BATCH * SEQ) == pytest.approx(1.0, rel=0.10)


def _offer(peak: str = "") -> object:
    entry = {
        "name": "box",
        "provider": "P",
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "nodes": 1,
        "interconnect": "nvlink",
        "price": {"hour": 2},
    }
    if peak:
        entry |= {"gpu": "custom:96GiB:sm_90", "peak_tflops": {"bfloat16": 500}}
    return parse_sheet({"offer": [entry]}, "sheet.toml").offers[0]


def test_duration_is_the_flops_over_peak_times_utilisation() -> None:
    """1e6 tokens are ceil(1e6 / 32) = 31,250 steps; on 8 H100s at 989.5 dense bf16 TFLOPS x 0.40."""
    step = traced()
    duration = training_duration(step, 1_000_000, _offer(), gpus=8, dtype="bf16")
    assert duration.training is not None and duration.training.steps == 31_250
    assert duration.seconds == pytest.approx(31_250 * step.total / (8 * 989.5e12 * MODEL_FLOPS_UTILISATION))
    assert duration.training.mfu_source == "MODEL_FLOPS_UTILISATION" and "H100" in duration.training.peak_source
    half = training_duration(step, 1_000_000, _offer(), gpus=8, dtype="bf16", mfu=0.2)
    assert half.seconds == pytest.approx(2 * duration.seconds) and half.training.mfu_source == "given"  # type: ignore[union-attr]


def test_a_gpu_without_a_known_peak_takes_the_sheets() -> None:
    step = traced()
    custom = training_duration(step, 1_000_000, _offer(peak="yes"), gpus=8, dtype="bfloat16")
    assert custom.training is not None and custom.training.peak_tflops == 500
    assert "price sheet sheet.toml" in custom.training.peak_source
    with pytest.raises(ConfigError, match=r"no dense float32 peak for custom:96GiB:sm_90; give it in the sheet"):
        training_duration(step, 1_000_000, _offer(peak="yes"), gpus=8, dtype="float32")
    with pytest.raises(ConfigError, match="mfu is the share of the peak"):
        training_duration(step, 1_000_000, _offer(), gpus=8, dtype="bf16", mfu=1.5)


def test_a_derived_quote_states_the_flops_and_the_assumption_at_80_columns() -> None:
    offer = load_sheet(EXAMPLE).offers[0]
    duration = training_duration(traced("full"), 10**12, offer, gpus=8, dtype="bf16")
    console = Console(width=80, record=True)
    render_quote(quote(offer, 8, duration, stop_after=None), console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    flat = " ".join(text.split())
    assert "FLOP per step (forward" in flat and "recompute 71.3MFLOP" in flat and "MODEL_FLOPS_UTILISATION" in flat
    assert "Prices come from the price sheet" in flat and str(EXAMPLE) in "".join(text.split())


def test_flash_attn_stand_ins_count_attention_as_torchs_kernels_do() -> None:
    """On an H100 target, flash-attn's stand-ins count the FLOPs torch's formulas give its own SDPA kernels (cuDNN
    here, whose backward recomputes the scores: one more matmul than eager's)."""
    steps = {}
    for attention in ("sdpa", "flash_attention_2", "flash_attention_3"):
        options = {"task": "train", "batch_size": BATCH, "seq_len": SEQ, "device": "h100", "dtype": "bfloat16"}
        config = SimulationConfig(**options, attn_implementation=attention)
        _, _, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="marked")
        steps[attention] = step_flops(build_graph(trace), BATCH * SEQ)
    assert steps["flash_attention_2"] == steps["sdpa"] == steps["flash_attention_3"]
    assert steps["sdpa"].forward == traced().forward  # eager's matmuls on the CPU
