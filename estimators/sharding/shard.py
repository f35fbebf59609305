"""Data parallelism as a what-if over the traced program: what one rank holds.

The choices (``ShardingPlan``; every rank of pure data parallelism holds the same, so one rank
stands for all):

- DDP (``gpus > 1``, no ZeRO, no FSDP): each replica holds the whole program plus DDP's gradient
  buckets: flat buffers (the first 1 MiB, the others 25 MiB) made when DDP wraps the model and
  kept for the run; with ``gradient_as_bucket_view=False`` (DDP's default) ``.grad`` stays
  separate, with True each ``.grad`` is a view into its bucket and the buckets are the gradients.
- ZeRO-1/2/3 (DeepSpeed): optimizer states (1), + gradients (2), + weights (3) partitioned over the
  ranks; the fp32 master copy of the rank's partition its optimizer updates (stages 1-2 always,
  stage 3 when the weights are not fp32); the reduce bucket (``reduce_bucket_size``); ZeRO-3 gathers a block's weights around its
  forward and its backward, prefetches up to ``stage3_prefetch_bucket_size`` elements of the next
  block, keeps weights under ``stage3_param_persistence_threshold`` whole, and reduces gradients
  into a flat buffer of its partitions made at start-up.
- FSDP2 (``fully_shard`` on each block, then on the root), as torch 2.13's
  ``_fsdp_param_group.py`` runs it: weights, gradients and optimizer states sharded on dim 0; a
  block's weights are all-gathered into a flat output and copied out; in forward the output is
  kept until the next block's copy-out is done, in backward it is dropped after the copy-out and
  the next block's all-gather is prefetched; ``full`` (``reshard_after_forward=True``) frees the
  weights after the forward, ``grad-op`` (False) keeps them to the backward; the root's weights
  (embeddings, final norm, head) stay gathered from forward to the end of backward (FSDP2 does
  not reshard the root after forward); after a block's backward it reshards, copies its gradients
  into a reduce-scatter input (freed when the next block's reduce begins) and keeps its shard.
  Checked against torch's FSDP2 run for real under a fake process group
  (``tests/ground_truth/test_data_parallel_ground_truth.py``).
- HSDP (``hybrid``): FSDP2 full over a shard group of ``shard_group`` ranks, replicated across the
  groups; the replicas all-reduce the gradients' shards in place, so a rank holds what FSDP2 full
  over the group holds.
- Mixed precision (a program traced under torch.autocast): ZeRO and FSDP run their own, not autocast
  (``precision.py``): FSDP2's ``MixedPrecisionPolicy`` gathers the fp32 shards in the low
  dtype, DeepSpeed's bf16/fp16 mode holds the weights and gradients in it beside fp32 master and
  gradient partitions; autocast's copies of the weights are dropped. DDP keeps autocast.
- CPU offload (``offload``): the model states DeepSpeed ZeRO-Offload or FSDP2's CPUOffloadPolicy
  keep in host memory leave the device and are counted in ``Sharded.host`` (``offload.py``).
- Expert parallelism among the data-parallel ranks (``expert_parallel``): a routed expert's states are
  divided over the ``expert_shard_size`` ranks holding the same experts (DeepSpeed 0.19.8: MoE groups over
  ``expert_dp_process_group``; torchtitan: ``dp_shard_mod_ep``), the other weights' over every shard rank;
  FSDP2 gathers the experts as a group of their own inside their block (torchtitan's ``apply_fsdp``).
- Gradient accumulation (``grad_accum``): the schedule is placed on each traced micro-step
  (``micro_steps.py``); DDP (``no_sync``), ZeRO-1 and FSDP2 (``set_requires_gradient_sync(False)``) keep the
  whole gradients to the last micro-step's reduce, ZeRO-2/3 reduce each micro-step into the partitions
  (``windows._reducing_micro_step``).

It transforms a ``Timeline`` (the traced one, or the one a checkpointing what-if made: apply
checkpointing first, then sharding) and reads the graph it came from for what each traced block
is: traced storages keep their sid as key, so the graph gives a weight's name and shape, a
gradient's owner and the blocks' clocks. Its own events sit after a clock's traced and
checkpointing events: tier 2 (buffers filled before frees), 3 (frees), 4 (allocations), 5 (frees
of what was just made).

Known limitations: ZeRO-3 gathers at block granularity (DeepSpeed fetches per submodule, so
fewer weights may be live inside a block) and keeps non-block weights gathered from forward to
the end of backward as FSDP2's root does; ZeRO-1/2's flat buffers are padded per group to
2 x N elements, here each tensor is padded alone (a difference under 2 x N elements per tensor);
the full-size gradient a ZeRO hook copies into the bucket is counted as a moment, not a span.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import networkx as nx

from ..timeline import Timeline, order_blocks
from .buckets import ddp_buckets
from .nvme import swap_to_nvme
from .offload import offload_to_host
from .plan import ShardingPlan
from .precision import mixed_precision
from .rank import MODEL_STATE, Rank
from .states import master_partition, shard_states
from .windows import training_windows

__all__ = ["Sharded", "shard"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sharded:
    """One rank's program under a ``ShardingPlan``."""

    plan: ShardingPlan
    timeline: Timeline
    model_state: dict[str, int]
    """Bytes of weights, gradients (of one step) and optimizer states the rank holds, as allocated (not the whole
    gradients accumulated before FSDP2's reduce-scatter or DDP's bucket views take them)."""
    gathered_elements: int
    """Most weight elements gathered at once (ZeRO-3/FSDP: the current block, the prefetched part, the root)."""
    buffers: dict[str, int] = field(default_factory=dict)
    """Communication buffers by name: bytes of one buffer of that kind."""
    notes: list[str] = field(default_factory=list)
    host: dict[str, int] = field(default_factory=dict)
    """Bytes the rank keeps in host memory under CPU offload (not device memory), by kind: parameters,
    gradients, optimizer_states, buffers (``offload.py``)."""


def shard(graph: nx.MultiDiGraph, timeline: Timeline, plan: ShardingPlan, *, weights: Collection[str] | None = None) -> Sharded:
    """``timeline`` (of the program traced as ``graph``) as one rank of ``plan`` runs it. ``weights``: the
    rank holds only these (a pipeline stage's, ``PipelineSplit.weights``); its buffers, gathers and shards
    are theirs, and the other weights' blocks are left for the stage split to drop."""
    rank = Rank(graph, timeline, plan, weights)
    if plan.zero or plan.shards_parameters:
        mixed_precision(rank)
    shard_states(rank)
    if plan.zero or plan.fsdp != "no":
        training_windows(rank)
        master_partition(rank)
    elif plan.gpus > 1 and any(rank.grads.values()):
        ddp_buckets(rank)
    if plan.offload != "none":
        offload_to_host(rank)
        if plan.zero_settings.nvme is not None:
            swap_to_nvme(rank, plan.zero_settings.nvme)
    return Sharded(
        plan=plan,
        timeline=order_blocks(rank.blocks, graph.graph["step_clocks"]),
        model_state=_model_state(rank),
        gathered_elements=rank.gathered,
        buffers=rank.buffers,
        notes=rank.notes,
        host=rank.host,
    )


def _model_state(rank: Rank) -> dict[str, int]:
    """Bytes of the weights as held (not gathered), the optimizer states and one step's gradients the rank holds."""
    last_step = len(rank.graph.graph["step_clocks"]) - 1
    model_state = dict.fromkeys(MODEL_STATE, 0)
    for key, block in enumerate(rank.blocks):
        if not rank.holds(key) or key in rank.whole_gradients:
            continue
        if (
            (block.category == "parameters" and block.op != "all_gather")
            or block.category == "optimizer_states"
            or (block.category == "gradients" and block.step in (-1, last_step))
        ):
            model_state[block.category] += block.nbytes
    return model_state
