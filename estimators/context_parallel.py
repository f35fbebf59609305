"""Context parallelism's ring buffers, placed on the timeline of the program one CP rank runs.

A CP rank runs the model on its ``seq / cp`` tokens (torch's ``context_parallel`` shards the batch's
sequence dimension, round-robin in two chunks per rank for causal load balance), so the traced
program of that length gives its weights, activations and the local q, k, v, output and logsumexp
that the attention saves for backward. What it does not run is the ring, torch 2.13's
``_templated_ring_attention`` and ``_templated_ring_attention_backward``
(``torch/distributed/tensor/experimental/_context_parallel/_attention.py``), inside each SDPA call:

- forward: K/V travel round the ring: at each step the rank holds the chunk it received last
  (``rotater.next_buffer()``, reshaped as key and value), the flat copy it sends on
  (``torch.cat([key.flatten(), value.flatten()])``) and the buffer receiving the next
  (``permute_tensor``): three local-K/V-sized buffers; ``_SDPAMerger`` merges each step's output
  into a float32 output and logsumexp (``convert_to_f32``, the default);
- backward: the same K/V ring, float32 accumulators for the gradients of q, k and v
  (``zeros_like(..., dtype=accum_dtype)``), and the K/V gradients' own ring: the flat copy sent on
  and the buffer receiving the next, in float32.

Only the local K/V are saved for backward (the backward runs the ring again). Each SDPA call gets
those buffers for the op's duration. The merge's own temporaries (``out - block_out`` and the
sigmoid terms, output-sized) are not counted.
"""

from __future__ import annotations

from math import prod
from typing import Any

import networkx as nx

from vramsim.tracer.graph import storage_nodes

from .timeline import Block, Timeline, order_blocks

__all__ = ["RING", "ring_buffers"]

RING = "cp.ring"
"""The op name of the added K/V ring buffers (category ``communication``)."""
_FP32 = 4
_AFTER = 1 << 30
"""Seq of the added events at a clock: after any a checkpointing what-if placed there (tier 1)."""


def _qkv(reads: list[dict[str, Any]], out_numel: int) -> tuple[int, int, int]:
    """q's elements, k's and v's elements and k's and v's bytes, from the storages an SDPA forward read in argument
    order (each storage once). Fewer than three: q, k and v are views of one storage, a fused QKV projection split
    (GPT-2's ``c_attn``), whose q has the output's elements (those models' heads have one width)."""
    if len(reads) < 3:
        fused = reads[0]
        kv_numel = prod(fused["shape"]) - out_numel
        return out_numel, kv_numel, kv_numel * (fused["nbytes"] // prod(fused["shape"]))
    q, k, v = reads[:3]
    return prod(q["shape"]), prod(k["shape"]) + prod(v["shape"]), k["nbytes"] + v["nbytes"]


def ring_buffers(graph: nx.MultiDiGraph, timeline: Timeline) -> tuple[Timeline, int]:
    """``timeline`` with each SDPA call's ring buffers, and the bytes of the largest K/V ring (three chunks)."""
    attrs = {sid: a for sid, a in storage_nodes(graph)}
    blocks = [block.copy() for block in timeline.blocks]
    largest = 0
    forwards: dict[tuple[str, int], tuple[int, int, int]] = {}  # (module, step): q, k and v as its forward read them
    for node, op in graph.nodes(data=True):
        if node[0] != "op" or "scaled_dot_product" not in op["name"] or op["phase"] not in ("forward", "backward"):
            continue
        reads = [attrs[sid] for (_, sid), _, key in graph.in_edges(node, keys=True) if key == "read"]
        produced = [attrs[sid] for _, (_, sid), key in graph.out_edges(node, keys=True) if key == "produced"]
        if op["name"].endswith("_backward"):  # q, k, v as its forward read them (reads[0]: the output's gradient)
            q_numel, kv_numel, kv = forwards.get((op["module"], op["step"])) or _qkv(reads[1:], prod(reads[0]["shape"]))
            # gradient accumulators of q, k, v and the K/V gradients' ring (sent, receiving)
            scratch = _FP32 * (q_numel + kv_numel) + 2 * _FP32 * kv_numel
        else:  # the merger's float32 output and logsumexp, the size of the op's own
            q_numel, kv_numel, kv = forwards[op["module"], op["step"]] = _qkv(reads, prod(produced[0]["shape"]))
            scratch = _FP32 * prod(produced[0]["shape"]) + sum(p["nbytes"] for p in produced[1:2])
        largest = max(largest, 3 * kv)
        clock = op["clock_after"]
        for nbytes, category in ((3 * kv, "communication"), (scratch, "temporaries")):
            blocks.append(
                Block(
                    nbytes=nbytes,
                    category=category,
                    module=op["module"],
                    phase=op["phase"],
                    op=RING,
                    step=op["step"],
                    alloc_at=(clock - 1, 1, _AFTER),
                    free_at=(clock, 1, _AFTER),
                )
            )
    if not largest:
        raise NotImplementedError(
            "cp: torch's context_parallel runs the flash, memory-efficient and cuDNN SDPA kernels "
            "as a ring; none ran in this trace (attn_implementation='sdpa', with a dtype and head "
            "size those kernels take on the target)"
        )
    return order_blocks(blocks, graph.graph["step_clocks"]), largest
