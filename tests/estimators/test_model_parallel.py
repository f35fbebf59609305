"""Tensor and pipeline parallelism per rank: TP divides exactly the weights Megatron divides, a pipeline's
stages hold the model's states once between them, the micro-batches in flight follow torch's schedules,
and what is not modelled is refused in one line."""

from __future__ import annotations

import copy
from math import ceil
from typing import Any

import pytest
import transformers

import vramsim
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.pipeline_schedule import in_flight, pipeline_plan
from vramsim.workload.models import build_model

OPTIONS: dict[str, Any] = {"task": "train", "batch_size": 2, "seq_len": 16, "device": "cpu"}


@pytest.fixture(scope="module")
def llama() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=301,
        max_position_embeddings=64,
    )


@pytest.fixture(scope="module")
def tp_reports(llama: transformers.LlamaConfig) -> list[vramsim.Report]:
    """One trace of a TP rank: alone on 4 GPUs, and with ZeRO-1 over 2 data-parallel ranks of 8 GPUs."""
    return vramsim.simulate_each(llama, [{"gpus": 4}, {"gpus": 8, "zero": 1}], tp=4, **OPTIONS)


def test_tp_divides_attention_mlp_embedding_and_head_and_keeps_norms_whole(
    llama: transformers.LlamaConfig, tp_reports: list[vramsim.Report]
) -> None:
    tp = 4
    expected = 0
    for name, p in build_model(llama, device="meta", dtype=None).named_parameters():
        if "norm" in name:
            expected += 4 * p.numel()
        elif name.endswith(("embed_tokens.weight", "lm_head.weight")):
            expected += 4 * ceil(p.shape[0] / tp) * p.shape[1]  # torch.chunk's first (largest) slice of the vocabulary
        else:
            expected += 4 * p.numel() // tp
    ranks = tp_reports[0].ranks
    assert ranks is not None and ranks.tp == tp and ranks.gpus == tp and ranks.scheme == "TP 4"
    assert ranks.model_state["parameters"] == expected


def test_tp_composes_with_zero_over_the_data_parallel_ranks(tp_reports: list[vramsim.Report]) -> None:
    """--gpus 8 --tp 4 is ZeRO-1 over 2 data-parallel ranks of the TP rank's program: half its optimizer states."""
    alone, both = (r.ranks for r in tp_reports)
    assert both is not None and alone is not None and both.scheme == "TP 4 x ZeRO-1 2"
    assert both.model_state["optimizer_states"] < 0.51 * alone.model_state["optimizer_states"]


def test_dp_counts_the_gpus_as_dp_x_tp_x_pp(llama: transformers.LlamaConfig, tp_reports: list[vramsim.Report]) -> None:
    """--dp 2 --tp 4 is --gpus 8 --tp 4."""
    report = vramsim.simulate(llama, dp=2, tp=4, zero=1, **OPTIONS)
    assert report.ranks is not None and report.ranks.gpus == 8 and report.ranks.scheme == "TP 4 x ZeRO-1 2"
    assert report.peak_bytes == tp_reports[1].peak_bytes


def test_pipeline_stages_hold_the_model_states_once_between_them(llama: transformers.LlamaConfig) -> None:
    """Weights, gradients and optimizer states split between the stages, each held once (the rotary
    table, a buffer, is every stage's own); the busiest stage is the one reported."""
    variants = [{"gpus": 2}] + [{"pp": 2, "pp_schedule": s, "micro_batches": 4} for s in ("gpipe", "1f1b")]
    one, gpipe, onef1b = (r.ranks for r in vramsim.simulate_each(llama, variants, **OPTIONS))
    assert one is not None and gpipe is not None and onef1b is not None
    assert [s.layers for s in gpipe.stages] == [["model.layers.0", "model.layers.1"], ["model.layers.2", "model.layers.3"]]
    for category, nbytes in one.model_state.items():
        assert sum(s.model_state[category] for s in gpipe.stages) == nbytes
    # GPipe's busiest backward is its second: 3 micro-batches in flight beside the first's gradients
    assert [s.in_flight for s in gpipe.stages] == [3, 3] and [s.in_flight for s in onef1b.stages] == [2, 1]
    for g, f in zip(gpipe.stages, onef1b.stages, strict=True):  # more micro-batches held, never a lower peak
        assert 0 <= g.peak_bytes - f.peak_bytes <= g.held_bytes * (4 - f.in_flight)
    assert gpipe.stages[0].peak_bytes > onef1b.stages[0].peak_bytes
    assert gpipe.busiest_stage == max(gpipe.stages, key=lambda s: s.device_bytes).rank


def test_a_tied_embedding_is_held_on_the_first_stage_and_the_last(llama: transformers.LlamaConfig) -> None:
    tied = copy.deepcopy(llama)
    tied.tie_word_embeddings = True
    ranks = vramsim.simulate(tied, pp=2, **OPTIONS).ranks
    assert ranks is not None
    table = 4 * tied.vocab_size * tied.hidden_size
    first, last = (s.model_state for s in ranks.stages)
    assert last["parameters"] - first["parameters"] == 4 * tied.hidden_size  # layers alike; the last adds the final norm
    assert first["optimizer_states"] > 2 * table and last["optimizer_states"] > 2 * table


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 4, 3), (8, 8, 4), (2, 2, 2)])
def test_interleaved_in_flight_follows_torchs_schedule(p: int, m: int, v: int) -> None:
    """Chunk-micro-batches forwarded and not yet backwarded, at most, per rank of torch's own action list."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, _ComputationType

    schedule = ScheduleInterleaved1F1B.__new__(ScheduleInterleaved1F1B)  # the action list needs no stages
    schedule.pp_group_size, schedule.n_local_stages, schedule._n_microbatches = p, v, m
    schedule.number_of_rounds = max(1, m // p)
    schedule.microbatches_per_round = m // schedule.number_of_rounds
    for rank in range(p):
        held = most = 0
        for action in schedule._calculate_single_rank_operations(rank):
            if action is not None:
                held += {_ComputationType.FORWARD: 1, _ComputationType.FULL_BACKWARD: -1}.get(action.computation_type, 0)
                most = max(most, held)
        assert in_flight(pipeline_plan(p, "interleaved-1f1b", m, v), rank) * v == most


@pytest.mark.parametrize(
    ("source", "options", "error", "match"),
    [
        ("gpt2", {"tp": 2}, UnsupportedError, "tp splits"),
        ("llama", {"tp": 3}, ConfigError, "must divide num_attention_heads"),
        ("llama", {"tp": 2, "gpus": 3}, ConfigError, "multiple of tp x pp"),
        ("llama", {"dp": 2, "tp": 2, "gpus": 2}, ConfigError, "is 4 GPUs, not gpus=2: give --dp or --gpus"),
        ("llama", {"pp": 3}, ConfigError, "do not split evenly"),
        ("llama", {"pp": 2, "gpus": 4, "zero": 2}, UnsupportedError, "DeepSpeed refuses ZeRO-2 with pipeline"),
        ("llama", {"pp": 2, "gpus": 4, "zero": 3}, UnsupportedError, "DeepSpeed refuses ZeRO-3 with pipeline"),
        (
            "llama",
            {"pp": 2, "gpus": 4, "fsdp": "full", "offload_states": "params", "device": "h100"},
            UnsupportedError,
            "offload_states with pp",
        ),
        ("llama", {"pp": 2, "pp_schedule": "zb"}, ConfigError, "unknown pipeline schedule"),
        ("llama", {"pp": 2, "task": "forward"}, ConfigError, "not training"),
    ],
)
def test_refused_in_one_line(
    llama: transformers.LlamaConfig, source: str, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        vramsim.simulate(llama if source == "llama" else source, **{**OPTIONS, **options})


def test_a_later_backward_holds_the_accumulated_gradients_and_the_micro_batches_in_flight(
    llama: transformers.LlamaConfig,
) -> None:
    """1F1B with more micro-batches than a rank holds: from the second backward on, the rank holds every gradient
    accumulated so far beside its micro-batches in flight; GPipe's backwards all follow its forwards."""
    variants = [{"pp": 2, "pp_schedule": s, "micro_batches": 4} for s in ("1f1b", "gpipe")]
    onef1b, gpipe = (r.ranks for r in vramsim.simulate_each(llama, variants, **OPTIONS))
    assert onef1b is not None and gpipe is not None
    for stage in onef1b.stages:
        assert stage.in_flight < 4
        assert stage.peak_bytes >= sum(stage.model_state.values()) + stage.held_bytes * stage.in_flight
    for staged, piped in zip(onef1b.stages, gpipe.stages, strict=True):  # GPipe holds more micro-batches, never less
        assert piped.peak_bytes >= staged.peak_bytes


def test_tp_generate_on_a_moe_decoder_splits_each_expert_and_keeps_the_router_whole() -> None:
    """Mixtral as its transformers base_model_tp_plan splits it: attention and each expert's gate_up/down by tp, the
    vocabulary chunked, norms and router (mlp.gate) whole; traced as the generation one rank runs."""
    mixtral = transformers.MixtralConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=4,
        num_local_experts=4,
        num_experts_per_tok=2,
        vocab_size=301,
        max_position_embeddings=64,
    )
    tp = 2
    expected = 0
    for name, p in build_model(mixtral, device="meta", dtype=None).named_parameters():
        if "norm" in name or name.endswith("mlp.gate.weight"):
            expected += 4 * p.numel()
        elif name.endswith(("embed_tokens.weight", "lm_head.weight")):
            expected += 4 * ceil(p.shape[0] / tp) * p.shape[1]
        else:
            expected += 4 * p.numel() // tp
    report = vramsim.simulate(mixtral, tp=tp, task="generate", max_new_tokens=3, seq_len=16, device="cpu")
    ranks = report.ranks
    assert ranks is not None and ranks.scheme == "TP 2" and ranks.gpus == tp
    assert ranks.model_state["parameters"] == expected
