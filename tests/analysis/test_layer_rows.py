"""The per-layer table under checkpointing says what each layer keeps: the checkpointed input, whatever its dtype."""

from __future__ import annotations

import pytest
import torch
import transformers

import vramsim
from vramsim.analysis import summary
from vramsim.analysis.traced import build_and_trace
from vramsim.analysis.whatifs import Analysis
from vramsim.config import SimulationConfig
from vramsim.estimators.checkpointing_plan import CheckpointPlan
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

SEQ, HIDDEN = 64, 64
PREFIX = "base_model.model.model."
OPTIONS = {"task": "train", "batch_size": 1, "seq_len": SEQ, "device": "h100", "lora": 16}


def _saved(rows: list[vramsim.LayerRow]) -> dict[str, int]:
    return {row.module.removeprefix(PREFIX): row.activation_bytes for row in rows}


def _applied(model: transformers.LlamaConfig, dtype: str) -> dict[str, int]:
    """The same rows from a re-trace with transformers' checkpointing applied: what torch's checkpoint saves."""
    target = resolve_target("h100")
    config = SimulationConfig(checkpointing="full", dtype=dtype, **OPTIONS)  # type: ignore[arg-type]
    _, specs, trace = build_and_trace(model, config, target, checkpointing="applied")
    plain = SimulationConfig(dtype=dtype, **OPTIONS)  # type: ignore[arg-type]
    analysis = Analysis(build_graph(trace), target, plain).run(CheckpointPlan("none"))
    return _saved(summary.layer_rows(specs, analysis.timeline, analysis.memory))


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_checkpointed_inputs_are_saved_in_any_dtype(tiny_llama: transformers.LlamaConfig, dtype: str) -> None:
    """LoRA with full checkpointing: each layer's input (1 x 64 x 64 in the weights' dtype) is what the checkpoint
    keeps, counted under the row that made it (the embedding for layer 0). In bf16 no op of the traced program saves
    it (the next RMSNorm saves its float32 copy; frozen base weights save no input), and the table read 0 B."""
    tiny_llama.architectures = ["LlamaForCausalLM"]
    report = vramsim.simulate(tiny_llama, checkpointing="full", dtype=dtype, advice="none", **OPTIONS)
    saved = _saved(report.layers)
    layer_input = SEQ * HIDDEN * torch.finfo(torch.bfloat16 if dtype == "bf16" else torch.float32).bits // 8
    assert saved["embed_tokens"] == saved["layers.0"] == layer_input
    # the last layer's output is the final norm's input: saved only where the norm saves it as it is (fp32)
    assert saved["layers.1"] == (0 if dtype == "bf16" else layer_input)
    applied = _applied(tiny_llama, dtype)
    assert [saved[name] for name in ("embed_tokens", "layers.0", "layers.1")] == [
        applied[name] for name in ("embed_tokens", "layers.0", "layers.1")
    ]
