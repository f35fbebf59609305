"""The model states one rank keeps: its share of the weights and optimizer states, and DeepSpeed's fp32 master partition."""

from __future__ import annotations

from math import ceil

from .plan import itemsize
from .rank import Rank

__all__ = ["master_partition", "shard_states"]


def shard_states(rank: Rank) -> None:
    """Weights, optimizer states and the optimizer step's temporaries shrink to the rank's share."""
    for sid in range(rank.traced):
        block = rank.blocks[sid]
        if block.category == "optimizer_states" and rank.plan.shards_optimizer:
            block.nbytes = rank.shard_of(sid)
        elif block.category == "temporaries" and block.phase == "optimizer" and rank.plan.shards_optimizer:
            block.nbytes = ceil(block.nbytes / rank.ranks_of(rank.attrs[sid]["owner"]))  # the step runs on the shard
        elif (
            block.category == "parameters"
            and rank.attrs[sid]["owner"] in rank.weights
            and rank.sharded_weight(rank.weights[rank.attrs[sid]["owner"]])
        ):
            block.nbytes = rank.shard_of(sid)


def master_partition(rank: Rank) -> None:
    """DeepSpeed's optimizer updates an fp32 copy of the rank's partition of the trainable weights:
    stages 1-2 always clone it (stage_1_and_2.py ``single_partition_of_fp32_groups``), stage 3 only
    when the weights are not fp32 already (stage3.py ``fp32_partitioned_groups_flat``); offloaded, it is
    always a copy, on the host."""
    trainable = rank.trainable_weights()
    weights = [w for w in rank.weights.values() if w.name in trainable]
    if not rank.plan.zero or not weights:
        return
    fp32 = all(rank.element_size(w.sid) == 4 for w in weights)
    nbytes = sum(4 * ceil(w.numel / rank.ranks_of(w.name)) for w in weights)
    if rank.plan.offload != "none":
        rank.host["parameters"] = rank.host.get("parameters", 0) + nbytes
        return
    if rank.plan.zero == 3 and fp32:
        return
    rank.add(nbytes, "parameters", "zero.fp32_master_partition", alloc_at=rank.at(0, 4), free_at=None)
    if not all(itemsize(rank.attrs[w.sid]) == 4 for w in weights):
        rank.notes.append(
            "DeepSpeed keeps optimizer states with its fp32 master partition; the traced optimizer "
            "keeps them in the weights' dtype (DeepSpeed's bf16/fp16 modes are not modelled)"
        )
