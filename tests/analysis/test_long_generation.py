"""A long generation derived from two short traces equals the whole generation traced, event for event."""

from __future__ import annotations

from typing import Any

import pytest
import transformers

import vramsim
from vramsim.analysis import generation, traced
from vramsim.config import SimulationConfig
from vramsim.estimators.timeline import Timeline, derive_timeline
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

_TINY: dict[str, Any] = dict(
    vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)
_NEW_TOKENS = 14


def _llama() -> transformers.PretrainedConfig:
    return transformers.LlamaConfig(**_TINY, architectures=["LlamaForCausalLM"])


def _gemma2() -> transformers.PretrainedConfig:
    """Sliding-window layers between full ones; the window fills between the head's steps and the tail's."""
    return transformers.Gemma2Config(**_TINY, head_dim=8, sliding_window=16, architectures=["Gemma2ForCausalLM"])


def _t5() -> transformers.PretrainedConfig:
    """An encoder-decoder: the tail probe lengthens the decoder prompt and keeps the encoder's."""
    return transformers.T5Config(
        vocab_size=64,
        d_model=32,
        d_kv=8,
        d_ff=32,
        num_layers=2,
        num_heads=4,
        pad_token_id=0,
        decoder_start_token_id=0,
        architectures=["T5ForConditionalGeneration"],
    )


def _events(timeline: Timeline) -> list[tuple[bool, int, str, str, str]]:
    return [
        (alloc, timeline.blocks[key].nbytes, timeline.blocks[key].op, timeline.blocks[key].module, timeline.blocks[key].category)
        for key, alloc in timeline.events
    ]


def _llama_int8() -> tuple[transformers.PretrainedConfig, dict[str, Any]]:
    """LLM.int8 layers keep each call's outlier columns until their next call, across decode steps and into the
    next program step's prefill."""
    return _llama(), {"quantization": "int8", "dtype": "fp16"}


def _timelines(model: Any, device: str) -> tuple[Timeline, Timeline]:
    model, options = model if isinstance(model, tuple) else (model, {})
    config = SimulationConfig(task="generate", seq_len=6, max_new_tokens=_NEW_TOKENS, device=device, **options)
    target = resolve_target(device)
    program, _, head = traced.build_and_trace(model, generation.head_config(config), target, checkpointing="marked")
    probe, prepare = generation.tail_probe(config, program.batch)
    _, _, tail = traced.build_and_trace(model, probe, target, checkpointing="marked", prepare=prepare)
    derived = generation.derive(build_graph(head), build_graph(tail), _NEW_TOKENS).timeline
    _, _, whole = traced.build_and_trace(model, config, target, checkpointing="marked")
    return derived, derive_timeline(build_graph(whole))


@pytest.mark.parametrize(
    ("model", "device"),
    [(_llama, "cpu"), (_gemma2, "h100"), (_t5, "cpu"), (_llama_int8, "h100")],
    ids=["llama-cpu", "gemma2-h100", "t5-cpu", "llama-int8-h100"],
)
def test_derived_generation_is_the_traced_one(model: Any, device: str) -> None:
    """Every event, its bytes and its role: the cache's cat (old and new live), sliding layers capped at the window."""
    derived, whole = _timelines(model(), device)
    assert _events(derived) == _events(whole)
    assert derived.steps == whole.steps and derived.preexisting == whole.preexisting


def test_simulate_derives_long_generations_with_the_traced_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report says it derived, and its peak, reserved bytes and breakdown are the whole trace's."""
    monkeypatch.setattr(generation, "DERIVE_ABOVE", 8)
    options: dict[str, Any] = dict(task="generate", seq_len=6, max_new_tokens=_NEW_TOKENS, device="h100")
    derived = vramsim.simulate(_llama(), **options)
    monkeypatch.setattr(generation, "DERIVE_ABOVE", 1000)
    whole = vramsim.simulate(_llama(), **options)
    assert "decode_steps_derived" in {a.name for a in derived.assumptions}
    assert "decode_steps_derived" not in {a.name for a in whole.assumptions}
    assert (derived.peak_bytes, derived.reserved_bytes, derived.breakdown, derived.peak_at) == (
        whole.peak_bytes,
        whole.reserved_bytes,
        whole.breakdown,
        whole.peak_at,
    )


def test_steps_that_change_midway_are_refused() -> None:
    """Mistral slides in every layer: once the window fills, SDPA gets a mask it did not get before,
    so the tail's decode steps run other ops and the generation is traced whole instead."""
    model = transformers.MistralConfig(**_TINY, sliding_window=12, architectures=["MistralForCausalLM"])
    config = SimulationConfig(task="generate", seq_len=6, max_new_tokens=_NEW_TOKENS, device="cpu")
    target = resolve_target("cpu")
    program, _, head = traced.build_and_trace(model, generation.head_config(config), target, checkpointing="marked")
    probe, prepare = generation.tail_probe(config, program.batch)
    _, _, tail = traced.build_and_trace(model, probe, target, checkpointing="marked", prepare=prepare)
    with pytest.raises(ValueError, match="runs differently"):
        generation.derive(build_graph(head), build_graph(tail), _NEW_TOKENS)
