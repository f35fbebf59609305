"""Context parallelism per rank: a rank runs seq_len / cp tokens, each SDPA call adds torch's ring buffers (three
K/V chunks, the merger's float32 output in forward; the K/V ring, float32 gradient accumulators and the K/V
gradients' ring in backward), and what is not modelled is refused in one line."""

from __future__ import annotations

from typing import Any

import pytest
import transformers

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.context_parallel import RING, ring_buffers
from vramsim.estimators.timeline import derive_timeline
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

OPTIONS: dict[str, Any] = {"task": "train", "batch_size": 2, "device": "cpu"}
SEQ, CP, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 32, 2, 8, 4, 16, 2


@pytest.fixture(scope="module")
def llama() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=HEADS * HEAD_DIM,
        intermediate_size=256,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        vocab_size=301,
        max_position_embeddings=64,
    )


def test_each_attention_call_adds_the_ring_buffers_torch_makes(llama: transformers.LlamaConfig) -> None:
    """Per SDPA call of a rank's seq / cp tokens (fp32): forward 3 x (K + V) and a float32 output and logsumexp;
    backward 3 x (K + V), float32 accumulators of q, k, v and 2 x (K + V) in float32."""
    _, _, trace = build_and_trace(
        llama, SimulationConfig(cp=CP, seq_len=SEQ, **OPTIONS), resolve_target("cpu"), checkpointing="marked"
    )
    graph = build_graph(trace)
    timeline = derive_timeline(graph)
    ringed, largest = ring_buffers(graph, timeline)
    added = ringed.blocks[len(timeline.blocks) :]
    local = SEQ // CP
    q, kv = 2 * HEADS * local * HEAD_DIM, 2 * 2 * KV_HEADS * local * HEAD_DIM  # elements; K + V
    assert largest == 3 * 4 * kv
    assert len(added) == 2 * 2 * LAYERS * len(graph.graph["step_clocks"]) and {b.op for b in added} == {RING}
    forward = sorted(b.nbytes for b in added if b.phase == "forward" and b.category == "temporaries")
    backward = sorted(b.nbytes for b in added if b.phase == "backward" and b.category == "temporaries")
    assert set(forward) == {4 * q + 4 * 2 * HEADS * local}  # the merger's output and logsumexp
    assert set(backward) == {4 * (q + kv) + 2 * 4 * kv}
    assert all(b.free_at is not None and b.free_at[0] == b.alloc_at[0] + 1 for b in added)  # the op's duration


def test_a_fused_qkv_projection_rings_the_same_buffers() -> None:
    """GPT-2's q, k and v are views of one ``c_attn`` output (the SDPA call reads one storage): its ring holds the
    same K/V and float32 accumulators as a model whose projections are apart, on the same heads (bf16, flash)."""
    gpt2 = transformers.GPT2Config(n_embd=HEADS * HEAD_DIM, n_layer=LAYERS, n_head=HEADS, vocab_size=301, n_positions=64)
    config = SimulationConfig(cp=CP, seq_len=SEQ, **{**OPTIONS, "device": "h100-sxm", "dtype": "bf16"})
    _, _, trace = build_and_trace(gpt2, config, resolve_target("h100-sxm"), checkpointing="marked")
    graph = build_graph(trace)
    timeline = derive_timeline(graph)
    ringed, largest = ring_buffers(graph, timeline)
    added = ringed.blocks[len(timeline.blocks) :]
    local = SEQ // CP
    q = kv_half = 2 * HEADS * local * HEAD_DIM  # elements of q, and of K or V (all heads are K/V heads)
    assert largest == 3 * 2 * 2 * kv_half  # bf16
    backward = {b.nbytes for b in added if b.phase == "backward" and b.category == "temporaries"}
    assert backward == {4 * (q + 2 * kv_half) + 2 * 4 * 2 * kv_half}


def test_a_rank_runs_its_share_of_the_sequence(llama: transformers.LlamaConfig) -> None:
    """CP 2 over 32 tokens is the 16-token program plus DDP's buckets over the cp ranks (the weights are
    replicated unless --fsdp shards them over dp x cp) and the ring buffers, live only in attention."""
    alone = vramsim.simulate(llama, seq_len=SEQ // CP, **OPTIONS)
    ranks_report = vramsim.simulate(llama, seq_len=SEQ, cp=CP, **OPTIONS)
    ranks = ranks_report.ranks
    assert ranks is not None and ranks.scheme == f"CP {CP} x DDP {CP}" and ranks.cp == CP
    buckets = sum(v for k, v in ranks.buffers.items() if k.startswith("DDP"))
    ring = ranks.buffers["CP K/V ring (3 chunks, largest attention)"]
    assert ranks.model_state["parameters"] == alone.breakdown["parameters"]
    extra = ranks_report.peak_bytes - alone.peak_bytes - buckets
    assert 0 <= extra <= ring + 4 * (2 * HEADS * (SEQ // CP) * HEAD_DIM) * 3  # the ring and the backward's scratch
    sharded = vramsim.simulate(llama, seq_len=SEQ, cp=CP, gpus=4, fsdp="full", **OPTIONS).ranks
    assert sharded is not None and sharded.scheme == f"CP {CP} x FSDP2 full 4"


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"cp": 2, "seq_len": 18}, ConfigError, "multiple of 4"),
        ({"cp": 2, "seq_len": 32, "task": "forward"}, UnsupportedError, "modelled for training"),
        ({"cp": 2, "seq_len": 32, "attn_implementation": "eager"}, UnsupportedError, "none ran in this trace"),
        ({"cp": 2, "seq_len": 32, "gpus": 3}, ConfigError, "multiple of tp x pp x cp"),
    ],
)
def test_refused_in_one_line(
    llama: transformers.LlamaConfig, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        vramsim.simulate(llama, **{**OPTIONS, **options})
