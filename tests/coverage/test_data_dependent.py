"""The data-dependent policy (``tracer/data_dependent/``): each stated assumption, and MoE routing."""

from __future__ import annotations

import pytest
import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode

import vramsim
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError
from vramsim.tracer.categories import Phase
from vramsim.tracer.data_dependent import NOTE_BOOL, NOTE_SELECT_ALL, DataDependentPolicy, Routing, parse_routing, seed


class _Scope:
    phase = Phase.FORWARD
    step = 0
    module = "block"


class _Policy(TorchDispatchMode):
    """The policy alone under a dispatch mode, as MemoryTracer runs it."""

    def __init__(self, moe_routing: str = "balanced") -> None:
        super().__init__()
        self.notes: list[str] = []
        self.policy = DataDependentPolicy(_Scope(), self.notes, moe_routing=moe_routing)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten._local_scalar_dense.default:
            return self.policy.scalar(args[0])
        return self.policy.run(func, args, kwargs or {})


@pytest.mark.parametrize(
    ("routing", "loads"),
    [("balanced", [5, 5, 5, 5]), ("worst-case", [10, 10, 0, 0]), ("capacity:1.5", [8, 8, 4, 0]), ("capacity:1", [5, 5, 5, 5])],
)
def test_routing_loads(routing: str, loads: list[int]) -> None:
    rule = parse_routing(routing)
    assert rule.loads(10, 2, 4) == loads
    picks = rule.assignment(10, 2, 4)
    assert torch.bincount(picks.flatten(), minlength=4).tolist() == loads
    assert all(len(set(row.tolist())) == 2 for row in picks)  # top_k distinct experts per token


def test_eager_router_follows_the_routing() -> None:
    tokens, experts, top_k = 12, 4, 2
    for routing, expected in (("balanced", [6, 6, 6, 6]), ("worst-case", [12, 12, 0, 0])):
        with _Policy(routing) as mode:
            logits = torch.randn(tokens, experts, device="meta")
            _, chosen = torch.topk(logits.softmax(-1), top_k, dim=-1)
            mask = torch.nn.functional.one_hot(chosen, num_classes=experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
            rows = [torch.where(mask[e[0]])[1].shape[0] for e in hit]
            counts = torch.bincount(chosen.flatten(), minlength=experts).tolist()
        assert rows == [n for n in expected if n] and counts == expected
        assert mode.notes == [Routing(routing).describe()]


def test_unknown_values_are_all_selected() -> None:
    with _Policy() as mode:
        x = torch.randn(3, 5, device="meta")
        assert x[x > 0].shape == (15,)
        assert torch.nonzero(x).shape == (15, 2)
        assert torch.masked_select(x, x > 1).shape == (15,)
        assert torch.unique(x).shape == (15,)
        assert bool((x > 0).all()) is True
    assert NOTE_BOOL in mode.notes and NOTE_SELECT_ALL in mode.notes


def test_unknown_number_is_refused() -> None:
    with _Policy(), pytest.raises(NotImplementedError, match="reads the value of a float32 tensor"):
        torch.randn(4, device="meta").sum().item()


def test_seeded_inputs_are_read_exactly() -> None:
    ids = seed(torch.tensor([[3, 0, 7, 0]]), "meta")
    with _Policy() as mode:
        lengths = (ids != 0).sum(dim=1)
        assert lengths.max().item() == 2
        assert (ids > 2).nonzero().tolist() == [[0, 0], [0, 2]]
    assert len(mode.notes) == 1


def test_grouped_mm_in_float32_on_meta() -> None:
    with _Policy():
        out = torch._grouped_mm(
            torch.randn(8, 4, device="meta"),
            torch.randn(2, 4, 3, device="meta"),
            offs=torch.tensor([4, 8], dtype=torch.int32, device="meta"),
        )
    assert out.shape == (8, 3) and out.dtype == torch.float32


def test_moe_routing_option_is_checked() -> None:
    assert SimulationConfig(moe_routing="Capacity:1.25").moe_routing == "capacity:1.25"
    with pytest.raises(ConfigError, match="balanced, worst-case, capacity:F"):
        SimulationConfig(moe_routing="random")
    with pytest.raises(ConfigError):
        SimulationConfig(moe_routing="capacity:0.5")


def test_simulate_reports_the_routing_it_assumed() -> None:
    config = transformers.MixtralConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    config._experts_implementation = "eager"
    peaks = {}
    for routing in ("balanced", "worst-case"):
        report = vramsim.simulate(config, task="train", seq_len=32, device="h100", moe_routing=routing)
        notes = [a.detail for a in report.assumptions if a.name == "data_dependent"]
        assert Routing(parse_routing(routing).kind).describe() in notes
        assert report.options["moe_routing"] == routing
        peaks[routing] = report.peak_bytes
    assert peaks["worst-case"] != peaks["balanced"]  # the eager loop's per-expert buffers follow the load
