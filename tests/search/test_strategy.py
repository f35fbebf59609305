"""The strategy search: tensor, pipeline, context and expert parallel layouts, checkpointing auto, few traces."""

from __future__ import annotations

from typing import Any

import pytest
import transformers

import vramsim
from vramsim.config import SimulationConfig
from vramsim.estimators.assumptions import CONTEXT_PARALLEL_FROM_SEQ_LEN
from vramsim.results.strategy import SCHEMES
from vramsim.search import strategy, strategy_space
from vramsim.search.strategy import cheapest_strategy
from vramsim.search.strategy_space import PIPELINE_SCHEMES, settings

_MiB = 1 << 20

# The loss's float32 logits (4 x 512 x 32,000, 262 MB a copy) dwarf the weights (4.2M parameters): data
# parallelism never splits them, tensor parallelism's vocabulary-parallel loss halves them.
_WIDE_VOCAB = transformers.LlamaConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=32000,
    max_position_embeddings=1024,
)
_ASKED = {"seq_len": 512, "batch_size": 4, "device": "h100"}

# Eight layers of long activations: checkpointing decides whether one GPU holds the step.
_DEEP = transformers.LlamaConfig(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=8,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=1000,
    max_position_embeddings=2048,
)

_MIXTRAL = transformers.MixtralConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=500,
    num_local_experts=8,
    num_experts_per_tok=2,
)


def _headroom(model: Any, usable: int, **options: Any) -> float:
    """The headroom that leaves ``usable`` bytes of the target's memory."""
    capacity = vramsim.simulate(model, task="forward", seq_len=8, device=options["device"]).capacity_bytes
    assert capacity is not None
    return 1 - usable / capacity


def _counting_traces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every build_and_trace call of the search, by tensor-parallel degree."""
    calls: list[int] = []
    real = strategy.build_and_trace

    def counted(model: Any, config: SimulationConfig, *args: Any, **kwargs: Any) -> Any:
        calls.append(config.tp)
        return real(model, config, *args, **kwargs)

    monkeypatch.setattr(strategy, "build_and_trace", counted)
    return calls


def test_tensor_parallel_fits_where_data_parallel_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs: no data-parallel scheme fits (each rank holds every logit), TP 2 does; one trace per tp degree."""
    headroom = _headroom(_WIDE_VOCAB, 1800 * _MiB, **_ASKED)
    calls = _counting_traces(monkeypatch)
    found = cheapest_strategy(_WIDE_VOCAB, gpus=2, headroom=headroom, **_ASKED)
    best = found.cheapest
    assert best is not None and (best.gpus, best.tp, best.scheme, best.checkpointing) == (2, 2, "one replica", "none")
    leanest = vramsim.simulate_each(
        _WIDE_VOCAB,
        [{"gpus": 2, "checkpointing": "full", **scheme} for scheme in ({"zero": 3}, {"fsdp": "full"}, {})],
        headroom=headroom,
        **_ASKED,
    )
    assert all(r.device_bytes > found.usable_bytes for r in leanest)  # ZeRO-3, FSDP2 full, DDP
    vocab_parallel = vramsim.simulate(_WIDE_VOCAB, headroom=headroom, **_ASKED, **best.options())
    assert vocab_parallel.device_bytes == best.device_bytes <= found.usable_bytes
    assert min(r.device_bytes for r in leanest) - best.device_bytes >= 4 * 512 * 32000 * 4 // 2  # half a logits copy
    assert calls == [1, 2] and found.traces == 2  # the one-rank program, then the TP 2 rank's; never one per setting
    assert len(found.candidates) > found.traces


def test_auto_is_never_worse_than_a_uniform_choice() -> None:
    """One GPU where no checkpointing does not fit: auto fits with no more recompute than any uniform choice that fits."""
    asked = {"seq_len": 1024, "batch_size": 8, "device": "h100"}
    headroom = _headroom(_DEEP, 1700 * _MiB, **asked)
    found = cheapest_strategy(_DEEP, gpus=1, headroom=headroom, **asked)
    auto = next(c for c in found.candidates if c.checkpointing == "auto")
    full = next(c for c in found.candidates if c.checkpointing == "full")
    assert auto.fits and found.cheapest == auto and auto.plan not in ("none", "full")
    every = vramsim.simulate(_DEEP, checkpointing="all", headroom=headroom, **asked).checkpointing
    flops = {c.checkpointing: c.cost.recomputed_flops for c in every}
    fitting = [c.checkpointing for c in every if c.device_bytes <= found.usable_bytes and c.checkpointing != "offload"]
    assert "none" not in fitting and "selective:torchtitan" in fitting
    for choice in fitting:  # shares of the same step's FLOPs: compared through full's
        assert auto.recomputed * flops["full"] <= full.recomputed * flops[choice]


def test_layouts_follow_the_model() -> None:
    """Expert parallelism only for experts, tensor parallelism only for dense decoders it splits, context
    parallelism only at long sequences, pipelines only across nodes."""
    short = SimulationConfig(task="train", seq_len=1024, device="h100")
    long = SimulationConfig(task="train", seq_len=CONTEXT_PARALLEL_FROM_SEQ_LEN, device="h100")
    dense = [s for n in (1, 2, 4, 8, 16) for s in settings(n, _WIDE_VOCAB, short)]
    moe = [s for n in (1, 2, 4, 8) for s in settings(n, _MIXTRAL, short)]
    assert all(s.ep == 1 and s.cp == 1 for s in dense) and {s.tp for s in dense} == {1, 2, 4, 8}
    assert {s.ep for s in moe} == {1, 2, 4} and all(s.tp == 1 for s in moe)  # 8 experts, top 2: at most 4 ranks
    assert all(s.dp % s.ep == 0 for s in moe) and any(s.ep == 2 and s.dp == 8 for s in moe)  # EP among the DP ranks
    assert {s.scheme for s in moe if s.ep > 1} == set(SCHEMES)  # the ep ranks run their own tokens: always data parallel
    assert {s.pp for s in dense if s.gpus <= 8} == {1} and {s.pp for s in dense if s.gpus == 16} == {1, 2}
    assert all(s.scheme in PIPELINE_SCHEMES for s in dense if s.pp > 1 and s.dp > 1)
    assert {s.cp for n in (2, 4) for s in settings(n, _WIDE_VOCAB, long)} == {1, 2, 4}
    assert {s.checkpointing for s in dense} == {"none", "selective", "every:2", "full", "auto"}


def test_pipeline_candidates_cost_their_bubble(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes of one GPU: a pipeline on 2; nothing fits, so every group's full checkpointing is measured, each
    pipeline's bubble is (p - 1) / m, or (p - 1) / (v m) interleaved, and its figure is simulate's."""
    monkeypatch.setattr(strategy_space, "GPUS_PER_NODE", 1)
    tiny = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        max_position_embeddings=256,
    )
    asked = {"seq_len": 64, "device": "h100", "micro_batches": 4}
    found = cheapest_strategy(tiny, gpus=2, headroom=_headroom(tiny, 64 * _MiB, **asked), **asked)
    assert found.cheapest is None and found.traces == 1
    piped = {c.pp_schedule: c for c in found.candidates if c.pp == 2}
    assert set(piped) == {"1f1b", "interleaved-1f1b"} and all(c.checkpointing == "full" for c in piped.values())
    assert (piped["1f1b"].bubble, piped["interleaved-1f1b"].bubble) == (1 / 4, 1 / 8)
    report = vramsim.simulate(tiny, **asked, **piped["1f1b"].options())
    assert report.device_bytes == piped["1f1b"].device_bytes


def test_the_table_names_each_setting_with_its_peak() -> None:
    """The CLI's table: the cheapest setting as flags, then each setting measured with its peak and device bytes."""
    from rich.console import Console

    from vramsim.results.strategy import Candidate, StrategySearch
    from vramsim.views.fit import render_strategies

    piped = Candidate(
        gpus=16,
        tp=8,
        pp=2,
        pp_schedule="1f1b",
        cp=1,
        ep=1,
        scheme="ZeRO-1",
        checkpointing="auto",
        plan="first:3",
        device_bytes=70 << 30,
        peak_bytes=66 << 30,
        fits=True,
        recomputed=0.01,
        recomputed_ops=0.02,
        bubble=0.125,
        communication=float(3 << 30),
    )
    search = StrategySearch(
        model="m",
        target="h100-sxm",
        usable_bytes=71 << 30,
        max_gpus=16,
        candidates=[piped],
        cheapest=piped,
        traces=2,
        skipped=5,
        notes=["tp=16: too many"],
        trace_seconds=1.0,
    )
    console = Console(width=200, record=True)
    render_strategies(search, console)
    text = console.export_text()
    assert "cheapest that fits: --gpus 16 --tp 8 --pp 2 --pp-schedule 1f1b --zero 1 --checkpointing auto" in text
    assert "TP 8 x PP 2 (1f1b)" in text and "auto: first:3" in text and "66.00 GiB" in text and "13.5%" in text
    assert "not tried: tp=16: too many" in text and "1 settings measured (5 skipped" in text and "2 trace(s)" in text
