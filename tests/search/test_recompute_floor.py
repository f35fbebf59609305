"""``RecomputeFloor``: a plan's recomputed share on a context-parallel layout, read off the reference of its tp."""

from __future__ import annotations

from fractions import Fraction
from functools import cache

import networkx as nx
import pytest
import transformers

from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.estimators.checkpointing import what_if
from vramsim.estimators.checkpointing_plan import CheckpointPlan, first_layers
from vramsim.search.recompute_floor import RecomputeFloor, step_ops
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

_MODEL = transformers.LlamaConfig(
    hidden_size=256,
    intermediate_size=1024,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=2000,
    max_position_embeddings=1024,
)
_SEQ = 512


@cache
def _graph(tp: int, cp: int, attention: str | None = None) -> nx.MultiDiGraph:
    chosen = {} if attention is None else {"attn_implementation": attention}
    config = SimulationConfig.from_options(
        task="train", tp=tp, cp=cp, seq_len=_SEQ, batch_size=2, device="h100", mixed_precision="bf16", **chosen
    )
    _, _, trace = build_and_trace(_MODEL, config, resolve_target("h100"), checkpointing="marked")
    return build_graph(trace)


@pytest.mark.parametrize(("tp", "cp"), [(1, 2), (1, 4), (2, 2), (2, 4)])
def test_the_floor_is_the_layouts_own_share(tp: int, cp: int) -> None:
    """Each ``first:F`` (and ``full``) recomputes on TP tp x CP cp the share of the step the floor reads off TP tp's
    program: the layout's linear FLOPs are 1/cp of the reference's and its SDPA FLOPs 1/cp^2, exactly."""
    reference, layout = _graph(tp, 1), _graph(tp, cp)
    floor = RecomputeFloor.of(reference, cp=1, tokens=_SEQ)
    assert floor is not None and 0 < floor.attention_flops < floor.step_flops
    step = sum(data["flops"] for _, data in step_ops(layout))
    layers = _MODEL.num_hidden_layers
    shares = []
    for full in range(1, layers + 1):
        plan = CheckpointPlan("full") if full == layers else first_layers(full)
        own = Fraction(what_if(layout, plan).cost.recomputed_flops, step)
        assert floor.share(what_if(reference, plan).cost.recomputed_flops, full, cp) == own, (full, own)
        shares.append(own)
    assert shares == sorted(shares) and len(set(shares)) == layers


def test_attention_as_matmuls_gets_no_floor() -> None:
    """Eager attention's scores hold two token dimensions (their FLOPs are quadratic in the tokens, counted as
    matmuls): no floor, so the layout is traced."""
    assert RecomputeFloor.of(_graph(1, 1, "eager"), cp=1, tokens=_SEQ) is None


def test_an_untraced_layouts_auto_is_settled_without_its_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1.7 GiB usable on 4 GPUs, auto on context-parallel layouts is weighed against a cheaper fit before their
    traces: where the floor and the references settle it, the layout is not traced, and the search answers and
    measures as it does with the floor off (every such auto traced and weighed on its own program)."""
    import vramsim
    from vramsim.search import strategy
    from vramsim.search.strategy import cheapest_strategy

    model = transformers.LlamaConfig(
        hidden_size=512,
        intermediate_size=2048,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        vocab_size=16000,
        max_position_embeddings=8192,
    )
    asked = {"seq_len": 1024, "batch_size": 4, "device": "h100", "mixed_precision": "bf16"}
    capacity = vramsim.simulate(model, task="forward", seq_len=8, device="h100").capacity_bytes
    assert capacity is not None
    asked["headroom"] = 1 - 1.7 * 2**30 / capacity
    traced: list[tuple[int, int, int]] = []
    settled: list[bool] = []
    trace, floored = strategy.StrategySearcher._trace, strategy.StrategySearcher._auto_floored_out
    monkeypatch.setattr(strategy.StrategySearcher, "_trace", lambda self, key: traced.append(key) or trace(self, key))
    monkeypatch.setattr(strategy.StrategySearcher, "_auto_floored_out", lambda *a: settled.append(floored(*a)) or settled[-1])
    found, with_floor = cheapest_strategy(model, gpus=4, cache=False, **asked), sorted(traced)
    monkeypatch.setattr(strategy.StrategySearcher, "_auto_floored_out", lambda *_: False)
    traced.clear()
    before = cheapest_strategy(model, gpus=4, cache=False, **asked)
    assert found.cheapest is not None and (found.cheapest.cp, found.cheapest.checkpointing) == (4, "auto")
    assert found.cheapest == before.cheapest and found.candidates == before.candidates
    assert any(settled) and set(with_floor) < set(traced)
