"""The gradient buckets one rank communicates through: DDP's Reducer buckets and DeepSpeed's reduce bucket."""

from __future__ import annotations

from ..assumptions import DEEPSPEED_OVERLAP_COMM_STAGES
from .plan import ddp_bucket_sizes
from .rank import COMMUNICATION, Rank

__all__ = ["ddp_buckets", "reduce_buckets"]


def ddp_buckets(rank: Rank) -> None:
    """DDP's Reducer: buckets over the trainable weights in reverse order, kept for the run."""
    trainable = rank.trainable_weights()
    weights = sorted(rank.weights.values(), key=lambda w: w.sid, reverse=True)
    sizes = [w.nbytes for w in weights if w.name in trainable]
    category = "gradients" if rank.plan.bucket_view else COMMUNICATION
    for index, nbytes in enumerate(ddp_bucket_sizes(sizes)):
        rank.add(nbytes, category, "ddp.bucket", alloc_at=rank.at(0, 4), free_at=None)
        rank.buffers[f"DDP bucket {index}"] = nbytes
    if rank.plan.bucket_view:  # the Reducer copies autograd's new gradient into its bucket and drops it
        for sids in rank.grads.values():
            for sid in sids:
                block = rank.blocks[sid]
                block.free_at = rank.at(block.alloc_at[0], 5)
                block.category = "temporaries"


def reduce_buckets(rank: Rank, step: int, grads: list[int]) -> None:
    """DeepSpeed's reduce (ipg) bucket: stage 1/2 for backward, stage 3 for the run."""
    if not rank.plan.zero:
        return
    element = max(rank.element_size(rank.weights[rank.attrs[sid]["owner"]].sid) for sid in grads)  # the weights' dtype
    nbytes = rank.plan.zero_settings.reduce_bucket * element
    if rank.plan.zero == 3:  # one bucket per gradient dtype, made at start-up
        if step == 0:
            rank.add(nbytes, COMMUNICATION, "zero.reduce_bucket", alloc_at=rank.at(0, 4), free_at=None)
            rank.buffers["ZeRO reduce bucket"] = nbytes
        return
    last = max(rank.blocks[sid].alloc_at[0] for sid in grads)
    # a pipeline reduces after the last micro-batch (DeepSpeed's PipelineEngine ``_exec_reduce_grads``)
    first = last if rank.plan.pipelined else min(rank.blocks[sid].alloc_at[0] for sid in grads)
    for _ in range(2 if rank.plan.zero in DEEPSPEED_OVERLAP_COMM_STAGES else 1):  # overlap_comm: double buffer
        rank.add(
            nbytes,
            COMMUNICATION,
            "zero.reduce_bucket",
            phase="backward",
            step=step,
            alloc_at=rank.at(first, 2),
            free_at=rank.at(last, 3),
        )
    rank.buffers["ZeRO reduce bucket"] = nbytes
