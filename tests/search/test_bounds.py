"""The strategy search's lower bound (``vramsim/search/bounds.py``): never above what a setting measures."""

from __future__ import annotations

import pytest
import transformers

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.estimators.checkpointing_plan import first_layers
from vramsim.results.strategy import Setting
from vramsim.search.bounds import FloorBound, TracedBound
from vramsim.search.strategy_space import settings
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

# Weights (3.1M parameters) well above the activations of 2 x 128 tokens: the weight, optimizer-state and gradient
# terms decide the bound.
_WIDE = transformers.LlamaConfig(
    hidden_size=256,
    intermediate_size=1024,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=2000,
    max_position_embeddings=512,
)
_ASKED = {"seq_len": 128, "batch_size": 2, "device": "h100", "mixed_precision": "bf16"}
_WIDER = transformers.LlamaConfig(**{**_WIDE.to_diff_dict(), "hidden_size": 1024, "intermediate_size": 4096, "vocab_size": 32000})
"""States (97M parameters, 1.5 GB) above what a second GPU adds outside the allocator (NCCL's buffers): one GPU does
not fit where ZeRO-2 on two is just ruled out."""


def test_the_bound_is_below_every_setting_on_two_gpus() -> None:
    """Every layout and scheme on 2 GPUs with full checkpointing (the least each holds) measures at least the bound;
    ZeRO-1 and ZeRO-2 hold the whole weights, ZeRO-2 onwards shards the gradients, ZeRO-3 keeps its reduce bucket
    (5e8 elements of the bf16 weights, no autocast here) for the run, every ZeRO stage an fp32 master partition,
    DDP its buckets, FSDP2 grad-op every weight gathered at the end of forward, as the bound says."""
    asked = {**_ASKED, "dtype": "bf16", "mixed_precision": None}
    config = SimulationConfig.from_options(task="train", **asked)
    target = resolve_target("h100")
    _, _, trace = build_and_trace(_WIDE, config, target, checkpointing="marked")
    bound = FloorBound.of(build_graph(trace), target, module_loading=config.cuda_module_loading)
    assert bound.weight_bytes == 2 * sum(p.numel() for p in transformers.LlamaForCausalLM(_WIDE).parameters())  # bf16
    assert 2 * bound.weight_bytes <= bound.optimizer_bytes < 2 * bound.weight_bytes + 1024  # AdamW's two, its steps
    assert bound.gradient_bytes == bound.weight_bytes == bound.gathered_bytes
    assert bound.bucket_bytes == 500_000_000 * 2 and bound.nccl_bytes > 0
    chosen = [s for s in settings(2, _WIDE, config) if s.checkpointing == "full"]
    for trace_key in {s.trace_key for s in chosen}:  # one trace per rank program, its schemes as variants
        alike = [s for s in chosen if s.trace_key == trace_key]
        layout = {k: v for k, v in alike[0].options().items() if k in ("tp", "cp")}
        variants = [{k: v for k, v in s.options().items() if k not in layout} for s in alike]
        for setting, report in zip(alike, vramsim.simulate_each(_WIDE, variants, **layout, **asked), strict=True):
            assert bound.bytes(setting) <= report.device_bytes, setting
    assert {s.trace_key for s in chosen} == {(1, 1, 1), (2, 1, 1), (1, 1, 2)}
    floors = {s.scheme: bound.bytes(s) for s in chosen if s.trace_key == (1, 1, 1)}
    half = bound.weight_bytes // 2
    assert floors["ZeRO-2"] - floors["ZeRO-3"] == half - bound.bucket_bytes  # whole weights against a shard and the bucket
    states, master = bound.optimizer_bytes - bound.optimizer_bytes // 2, bound.master_bytes // 2  # sharded
    ddp_buckets = bound.trained_bytes + bound.kept_input_bytes  # DDP's buckets with the inputs, ZeRO-1's gradients
    assert floors["DDP"] - floors["ZeRO-1"] == states - master + ddp_buckets - bound.gradient_bytes
    assert floors["ZeRO-1"] - floors["ZeRO-2"] == half  # the gradients at the step sharded
    gathered_at_forward_end = bound.gathered_bytes + bound.kept_input_bytes  # every weight at once, with the inputs
    assert floors["FSDP2 grad-op"] - floors["FSDP2 full"] == gathered_at_forward_end - bound.gradient_bytes // 2


def test_whole_weights_rule_out_zero_1_and_2_untraced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below what ZeRO-2 must hold on 2 GPUs, the search rules ZeRO-1, ZeRO-2 and DDP out without measuring them (the
    bound that split every weight over the data-parallel ranks measured them) and gives the same answer."""
    from vramsim.search import strategy
    from vramsim.search.strategy import cheapest_strategy

    config = SimulationConfig.from_options(task="train", **_ASKED)
    target = resolve_target("h100")
    _, _, trace = build_and_trace(_WIDER, config, target, checkpointing="marked")
    bound = FloorBound.of(build_graph(trace), target, module_loading=config.cuda_module_loading, autocast_itemsize=2)
    zero_2 = next(s for s in settings(2, _WIDER, config) if s.scheme == "ZeRO-2" and s.trace_key == (1, 1, 1))
    usable = bound.bytes(zero_2) - 1
    capacity = vramsim.simulate(_WIDER, task="forward", seq_len=8, device="h100").capacity_bytes
    assert capacity is not None
    asked = {**_ASKED, "headroom": 1 - usable / capacity}
    found = cheapest_strategy(_WIDER, gpus=2, **asked)

    def split_evenly(self: FloorBound, setting: Setting) -> int:  # the bound before: every state over tp x pp x dp
        spread = setting.tp * setting.pp * (setting.dp if setting.scheme not in ("DDP", "one GPU", "one replica") else 1)
        kept = self.kept_input_bytes // setting.cp if setting.pp == 1 else 0
        return (self.weight_bytes + self.optimizer_bytes) // spread + kept + self.fixed_bytes

    monkeypatch.setattr(strategy.FloorBound, "bytes", split_evenly)
    monkeypatch.setattr(strategy.TracedBound, "bytes", lambda *_: None)
    before = cheapest_strategy(_WIDER, gpus=2, **asked)
    assert found.cheapest == before.cheapest
    assert len(found.ruled_out) > len(before.ruled_out) and len(found.candidates) < len(before.candidates)
    assert not any(c.scheme in ("DDP", "ZeRO-1", "ZeRO-2") and c.tp == c.cp == 1 for c in found.candidates if c.gpus == 2)


def _references(model: object, gpus: int, asked: dict) -> tuple[FloorBound, list[TracedBound], list[Setting]]:
    """The bounds the search builds on ``gpus`` GPUs, every traced rank program (ep 1) a reference."""
    config = SimulationConfig.from_options(task="train", **asked)
    target = resolve_target(asked["device"])
    _, _, trace = build_and_trace(model, config, target, checkpointing="marked")
    floor = FloorBound.of(build_graph(trace), target, module_loading=config.cuda_module_loading, autocast_itemsize=2)
    chosen = [s for s in settings(gpus, model, config) if s.checkpointing != "auto"]
    references = []
    for tp, _, cp in sorted({s.trace_key for s in chosen}):
        layout = SimulationConfig.from_options(task="train", **asked, tp=tp, cp=cp)
        _, _, traced = build_and_trace(model, layout, target, checkpointing="marked")
        graph = build_graph(traced)
        bucket = floor.bucket_bytes
        references.append(
            TracedBound.of(graph, tp=tp, cp=cp, tokens=asked["seq_len"] // cp, autocast_itemsize=2, bucket_bytes=bucket)
        )
    return floor, references, chosen


def test_every_traced_program_bounds_every_setting_it_covers_on_four_gpus() -> None:
    """On 4 GPUs, every layout (TP 1-4 x CP 1-4), scheme and uniform checkpointing measures at least what each traced
    rank program bounds it by: the one-rank program over TP and CP, TP 4's over CP, each CP program over wider CP
    (fp32 weights under bf16 autocast, so ZeRO's narrower weights and gradients are weighed too)."""
    asked = {"seq_len": 256, "batch_size": 4, "device": "h100", "mixed_precision": "bf16"}
    model = transformers.LlamaConfig(**{**_WIDE.to_diff_dict(), "num_key_value_heads": 4})  # TP 4 splits the K/V heads
    floor, references, chosen = _references(model, 4, asked)
    assert {(r.tp, r.cp) for r in references} == {(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)}
    assert all(r.sdpa and set(r.sweeps) == {"none", "selective", "every:2", "full"} for r in references)
    covered = 0
    for trace_key in sorted({s.trace_key for s in chosen}):
        alike = [s for s in chosen if s.trace_key == trace_key]
        layout = {k: v for k, v in alike[0].options().items() if k in ("tp", "cp")}
        variants = [{k: v for k, v in s.options().items() if k not in layout} for s in alike]
        for setting, report in zip(alike, vramsim.simulate_each(model, variants, **layout, **asked), strict=True):
            assert floor.bytes(setting) <= report.device_bytes, setting
            for reference in references:
                bound = reference.bytes(setting, floor)
                covered += bound is not None
                assert bound is None or bound <= report.device_bytes, (reference.tp, reference.cp, setting)
    assert covered > len(chosen)  # most settings are covered by several programs


@pytest.mark.parametrize("torchtitan", [False, True])
def test_every_traced_program_bounds_autos_mixed_plans_on_two_gpus(torchtitan: bool) -> None:
    """``auto``'s ``first:F+selective:(L - F)`` at every F, each policy: every layout and scheme on 2 GPUs measures at
    least what each traced rank program bounds it by under that plan (its what-if on the reference), and the bound
    falls from F = 0 to F = L as the plan keeps less."""
    asked = {"seq_len": 256, "batch_size": 4, "device": "h100", "mixed_precision": "bf16"}
    floor, references, chosen = _references(_WIDE, 2, asked)
    layers = _WIDE.num_hidden_layers
    plans = [first_layers(f, layers - f, torchtitan=torchtitan) for f in range(layers + 1)]
    full = [s for s in chosen if s.checkpointing == "full"]
    covered = 0
    for trace_key in sorted({s.trace_key for s in full}):
        alike = [s for s in full if s.trace_key == trace_key]
        layout = {k: v for k, v in alike[0].options().items() if k in ("tp", "cp")}
        for plan in plans:
            variants = [{**{k: v for k, v in s.options().items() if k not in layout}, "checkpointing": plan.spec} for s in alike]
            for setting, report in zip(alike, vramsim.simulate_each(_WIDE, variants, **layout, **asked), strict=True):
                for reference in references:
                    bound = reference.plan_bytes(setting, floor, plan)
                    covered += bound is not None
                    assert bound is None or bound <= report.device_bytes, (reference.tp, reference.cp, plan.spec, setting)
    assert covered > len(full) * len(plans)  # most settings are covered by several programs
    one = next(r for r in references if (r.tp, r.cp) == (1, 1))
    setting = next(s for s in full if s.trace_key == (1, 1, 1) and s.scheme == "FSDP2 full")
    by_f = [one.plan_bytes(setting, floor, plan) for plan in plans]
    assert by_f[0] > by_f[-1] == one.bytes(setting, floor), by_f


def test_autos_bounded_plans_skip_their_what_ifs_with_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1.5 GiB usable on 4 GPUs, auto is weighed against a cheaper fit on many layouts: where a traced reference
    bounds ``first:F*+selective:(L - F*)`` above the usable memory, its what-if is not run, and every decision (the
    settings measured, what each measures, the answer) is the one the what-ifs make (the floor that settles an untraced
    layout's auto from the references alone, tested apart, is off)."""
    from vramsim.analysis.whatifs import Analysis
    from vramsim.search import strategy
    from vramsim.search.strategy import cheapest_strategy

    monkeypatch.setattr(strategy.StrategySearcher, "_auto_floored_out", lambda *_: False)

    model = transformers.LlamaConfig(**{**_WIDE.to_diff_dict(), "num_hidden_layers": 4, "num_key_value_heads": 4})
    asked = {"seq_len": 2048, "batch_size": 8, "device": "h100", "mixed_precision": "bf16"}
    capacity = vramsim.simulate(model, task="forward", seq_len=8, device="h100").capacity_bytes
    assert capacity is not None
    asked["headroom"] = 1 - 1.5 * 2**30 / capacity
    runs, skipped = [], []
    run, may_fit = Analysis.run, strategy.StrategySearcher._plan_may_fit
    monkeypatch.setattr(Analysis, "run", lambda self, *a, **k: runs.append(1) or run(self, *a, **k))
    monkeypatch.setattr(strategy.StrategySearcher, "_plan_may_fit", lambda *a: may_fit(*a) or skipped.append(1) or False)
    found, with_bound = cheapest_strategy(model, gpus=4, **asked), len(runs)
    monkeypatch.setattr(strategy.StrategySearcher, "_plan_may_fit", lambda *_: True)
    runs.clear()
    before = cheapest_strategy(model, gpus=4, **asked)
    assert found.cheapest is not None and found.cheapest.checkpointing == "auto"
    assert found.cheapest == before.cheapest and found.candidates == before.candidates
    assert skipped and with_bound == len(runs) - len(skipped)
