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
    if rank.plan.bucket_view:
        _gradients_into_buckets(rank)


def _gradients_into_buckets(rank: Rank) -> None:
    """With ``gradient_as_bucket_view`` the Reducer copies each ``.grad`` into its bucket view and points ``.grad``
    at the view (reducer.cpp ``mark_variable_ready_dense``) when the gradient is ready in a backward that syncs.
    Under ``no_sync`` the hooks do nothing: the micro-steps' gradients accumulate in the ``.grad`` autograd made
    (zero_grad set it to None) until the last micro-step's backward copies it in."""
    for step, sids in rank.grads.items():
        steps = rank.micro_steps.get(step, [])
        ready = steps[-1].ready if steps else {}
        for sid in sids:
            block = rank.blocks[sid]
            block.free_at = rank.at(ready.get(rank.attrs[sid]["owner"], block.alloc_at[0]), 5)
            if len(steps) > 1:  # accumulated, it is the gradient until then
                rank.whole_gradients.add(sid)
            else:  # a moment's copy
                block.category = "temporaries"


def reduce_buckets(rank: Rank, step: int, grads: list[int], ready: list[int]) -> None:
    """DeepSpeed's reduce (ipg) bucket: stage 1/2 from the first to the last gradient ready in the backward that
    reduces (``ready``: their clocks), stage 3 for the run."""
    if not rank.plan.zero:
        return
    element = max(rank.element_size(rank.weights[rank.attrs[sid]["owner"]].sid) for sid in grads)  # the weights' dtype
    nbytes = rank.plan.zero_settings.reduce_bucket * element
    if rank.plan.zero == 3:  # one bucket per gradient dtype, made at start-up
        if step == 0:
            rank.add(nbytes, COMMUNICATION, "zero.reduce_bucket", alloc_at=rank.at(0, 4), free_at=None)
            rank.buffers["ZeRO reduce bucket"] = nbytes
        return
    last = max(ready)
    # a pipeline reduces after the last micro-batch (DeepSpeed's PipelineEngine ``_exec_reduce_grads``)
    first = last if rank.plan.pipelined else min(ready)
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
