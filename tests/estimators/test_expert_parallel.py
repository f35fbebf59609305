"""Expert parallelism per rank: a rank holds num_experts / ep experts' weights, gradients and optimizer states and
the rest whole, exchanges its routed rows through two all-to-all buffers per dispatch and combine, and what is not
modelled is refused in one line."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import transformers

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import DATA_PARALLEL_COMMUNICATION
from vramsim.estimators.communication import LayerShape, communication_bytes
from vramsim.estimators.expert_parallel import ALL_TO_ALL, all_to_all_buffers
from vramsim.estimators.timeline import derive_timeline
from vramsim.tracer.graph import build_graph
from vramsim.workload.models import build_model
from vramsim.workload.targets import resolve_target

OPTIONS: dict[str, Any] = {"task": "train", "batch_size": 2, "seq_len": 16, "device": "cpu"}
EXPERTS, TOP_K, HIDDEN, LAYERS = 8, 2, 64, 2


@pytest.fixture(scope="module")
def mixtral() -> transformers.MixtralConfig:
    return transformers.MixtralConfig(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        num_local_experts=EXPERTS,
        num_experts_per_tok=TOP_K,
        max_position_embeddings=64,
    )


@pytest.mark.parametrize("ep", [2, 4])
def test_a_rank_holds_its_share_of_the_experts_and_the_rest_whole(mixtral: transformers.MixtralConfig, ep: int) -> None:
    """fp32 AdamW: 4 + 4 + 8 bytes per parameter the rank holds: every expert tensor's dim 0 divided by ep
    (torchtitan's Shard(0)), the rest whole; the router is the rank program's (num_experts / ep rows)."""
    held = 0
    for name, p in build_model(mixtral, device="meta", dtype=None).named_parameters():
        if ".experts." in name or name.endswith("mlp.gate.weight"):
            held += p.numel() // ep
        else:
            held += p.numel()
    ranks = vramsim.simulate(mixtral, ep=ep, **OPTIONS).ranks
    assert ranks is not None and ranks.scheme == f"EP {ep} x DDP {ep}" and ranks.ep == ep and ranks.gpus == ep
    steps = 4 * sum(1 for _ in build_model(mixtral, device="meta", dtype=None).parameters())
    assert ranks.model_state == {"parameters": 4 * held, "gradients": 4 * held, "optimizer_states": 8 * held + steps}
    exchange = ranks.buffers.pop("EP all-to-all buffer (2 per exchange)")
    assert exchange == 2 * 16 * TOP_K * HIDDEN * 4
    assert sum(ranks.buffers.values()) == 4 * held  # the ep ranks run their own tokens: DDP buckets every gradient


def test_the_exchanged_rows_are_in_the_routed_rows_dtype(mixtral: transformers.MixtralConfig) -> None:
    """bf16 weights route bf16 rows (the experts' fp32 routing-weight products are not what is sent)."""
    ranks = vramsim.simulate(mixtral, ep=2, dtype="bf16", **OPTIONS).ranks
    assert ranks is not None and ranks.buffers["EP all-to-all buffer (2 per exchange)"] == 2 * 16 * TOP_K * HIDDEN * 2


def test_each_exchange_adds_two_buffers_of_the_routed_rows(mixtral: transformers.MixtralConfig) -> None:
    """Dispatch at the op making the routed rows, combine at the experts call's end, both again in backward:
    4 exchanges x 2 buffers per MoE layer and step, each tokens x top_k rows of hidden_size in fp32."""
    config = SimulationConfig(ep=2, **OPTIONS)
    _, _, trace = build_and_trace(mixtral, config, resolve_target("cpu"), checkpointing="marked")
    graph = build_graph(trace)
    timeline = derive_timeline(graph)
    rows = 2 * 16 * TOP_K
    exchanged, nbytes = all_to_all_buffers(graph, timeline, rows=rows, hidden=HIDDEN)
    added = exchanged.blocks[len(timeline.blocks) :]
    assert nbytes == rows * HIDDEN * 4
    assert len(added) == 4 * 2 * LAYERS * len(graph.graph["step_clocks"])
    assert all(b.op == ALL_TO_ALL and b.nbytes == nbytes and b.free_at is not None for b in added)
    assert {b.module for b in added} == {f"model.layers.{i}.mlp.experts" for i in range(LAYERS)}
    assert all(b.free_at[0] == b.alloc_at[0] for b in added if b.free_at is not None)  # a moment each


def test_the_rank_runs_the_program_of_its_experts_plus_the_exchanges(mixtral: transformers.MixtralConfig) -> None:
    """EP 2 of 8 experts is the 4-expert model's program over 2 data-parallel ranks plus the all-to-all buffers,
    which are live only at the exchanges: the peak is that program's, or up to two buffers above it."""
    local = copy.deepcopy(mixtral)
    local.num_local_experts = EXPERTS // 2
    alone, ep = vramsim.simulate(local, gpus=2, **OPTIONS), vramsim.simulate(mixtral, ep=2, **OPTIONS)
    buffer = 2 * 16 * TOP_K * HIDDEN * 4
    assert 0 <= ep.peak_bytes - alone.peak_bytes <= 2 * buffer


def test_expert_and_pipeline_parallel_compose(mixtral: transformers.MixtralConfig) -> None:
    """EP 2 x PP 2 on 4 GPUs: the EP rank's program split into stages, each with its own layers' exchanges."""
    ranks = vramsim.simulate(mixtral, ep=2, pp=2, **OPTIONS).ranks
    assert ranks is not None and ranks.scheme == "EP 2 x PP 2 1f1b (2 micro-batches) x DDP 2" and ranks.gpus == 4
    assert [s.layers for s in ranks.stages] == [["model.layers.0"], ["model.layers.1"]]


@pytest.mark.parametrize(
    ("source", "options", "error", "match"),
    [
        ("llama", {"ep": 2}, UnsupportedError, "ep splits the experts"),
        ("mixtral", {"ep": 3}, ConfigError, "must divide the experts"),
        ("mixtral", {"ep": 8}, UnsupportedError, "fewer than top_k"),
        ("mixtral", {"ep": 2, "gpus": 6, "pp": 2}, ConfigError, "multiple of tp x pp x ep = 4"),
        (
            "mixtral",
            {"ep": 4, "gpus": 8, "fsdp": "hybrid", "shard_group_size": 2},
            ConfigError,
            r"must divide HSDP's shard group \(2 ranks\)",
        ),
        ("mixtral", {"ep": 2, "cp": 2, "seq_len": 16}, UnsupportedError, "cp with ep"),
        ("mixtral", {"ep": 2, "moe_routing": "worst-case"}, UnsupportedError, "balanced routing"),
        ("mixtral", {"ep": 2, "task": "forward"}, UnsupportedError, "modelled for training"),
    ],
)
def test_refused_in_one_line(
    mixtral: transformers.MixtralConfig, source: str, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    model = (
        mixtral
        if source == "mixtral"
        else transformers.LlamaConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=128
        )
    )
    with pytest.raises(error, match=match):
        vramsim.simulate(model, **{**OPTIONS, **options})


def test_the_experts_weights_are_synchronised_over_the_ranks_holding_them() -> None:
    """DDP over 8 ranks with EP 2: the dense weights' all-reduce over 8, each rank's half of the experts over the
    4 ranks holding the same half; no all-to-all without routed tokens (top_k 0)."""
    shape = LayerShape(
        layers=2, tokens=64, hidden=64, kv_width=64, activation_bytes=2, weight_bytes=1000, expert_weight_bytes=800
    )
    sent = communication_bytes(shape, scheme="DDP", dp=8, tp=1, pp=1, virtual=1, micro_batches=1, cp=1, ep=2, recomputed_layers=0)
    assert sent == DATA_PARALLEL_COMMUNICATION["DDP"][1] * (200 * 7 / 8 + 800 / 2 * 3 / 4)
