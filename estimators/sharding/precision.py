"""Mixed precision as ZeRO and FSDP2 run it on one rank, in place of the autocast the program was traced under."""

from __future__ import annotations

from math import ceil

from vramsim.tracer.graph import storage_node

from .plan import itemsize
from .rank import MODEL_STATE, Rank

__all__ = ["mixed_precision"]


def mixed_precision(rank: Rank) -> None:
    """Mixed precision as the sharding frameworks run it, not as torch.autocast does. Autocast casts a
    weight (``aten._to_copy`` of it) at its first use, caches the copy until the forward ends and
    autograd saves it for backward: a copy of every weight lives from its forward to its backward.
    FSDP2's ``MixedPrecisionPolicy(param_dtype=...)`` keeps fp32 shards and gathers them in the low
    dtype; DeepSpeed's bf16/fp16 mode holds the weights and their gradients in the low dtype (whole
    for stages 1-2, partitioned for stage 3), an fp32 master partition (``states.master_partition``) and,
    for stages 1-2, an fp32 copy of the gradient partition during the step (``single_grad_partition``);
    stage 3 reduces into its fp32 partitions. Neither runs autocast: the traced casts of those weights
    (recomputed ones too) are dropped and the gathered copy is the only one."""
    casts = _autocast_weight_casts(rank)
    if not casts:
        return
    low = next(iter(casts.values()))  # autocast's one dtype: the frameworks cast every weight to it
    rank.gather_itemsize = {w.name: low for w in rank.weights.values() if rank.plan.zero or rank.sharded_weight(w)}
    for key, block in enumerate(rank.blocks):
        source = key if key < rank.traced else block.copy_of
        if source is not None and source in casts:
            block.nbytes = 0
    if rank.plan.zero:
        added = {new for steps in rank.micro_steps.values() for micro in steps for new in micro.added}
        for sid, attrs in enumerate(rank.attrs):
            weight = rank.weights.get(attrs["owner"])
            own = attrs["category"] == "parameters" and weight is not None and weight.sid == sid
            gradient = attrs["category"] == "gradients" or sid in added  # accumulated: bf16 like the .grad
            if own or (gradient and rank.plan.zero < 3):
                rank.held_itemsize[sid] = low
                rank.blocks[sid].nbytes = rank.blocks[sid].nbytes // itemsize(attrs) * low
        if rank.plan.zero < 3 and rank.plan.offload == "none":  # offloaded, the host steps on it
            _fp32_gradient_partition(rank)
        rank.notes.append(
            f"DeepSpeed's bf16/fp16 mode for the autocast dtype: {len(rank.gather_itemsize)} weights and their "
            "gradients held in it, "
            "an fp32 master partition and fp32 gradient partitions for the optimizer, no autocast copies; the traced "
            "activations keep autocast's dtypes (the residual stream stays fp32 where DeepSpeed computes in the low dtype)"
        )
        return
    rank.notes.append(
        "mixed precision as FSDP2's MixedPrecisionPolicy runs it: "
        f"{len(rank.gather_itemsize)} sharded weights gathered in the autocast dtype, no autocast copies of them; "
        "the traced activations keep autocast's dtypes (the residual stream stays fp32 where FSDP2 computes in the "
        "low dtype: on a tiny Llama, +16% over torch's FSDP2 with MixedPrecisionPolicy run for real)"
    )


def _autocast_weight_casts(rank: Rank) -> dict[int, int]:
    """Traced storages that are autocast's copies of a weight (a ``_to_copy`` reading the weight's
    storage into a narrower dtype), by sid, with the bytes per element of the dtype cast to."""
    graph = rank.graph
    casts: dict[int, int] = {}
    for sid, attrs in enumerate(rank.attrs):
        if attrs["op"] != "aten._to_copy" or attrs["category"] in MODEL_STATE:
            continue
        producer = next(u for u, _, key in graph.in_edges(storage_node(sid), keys=True) if key == "produced")
        read = [u[1] for u, _, key in graph.in_edges(producer, keys=True) if key == "read"]
        weight = rank.weights.get(rank.attrs[read[0]]["owner"]) if len(read) == 1 else None
        if weight is None or weight.sid != read[0] or itemsize(attrs) >= itemsize(rank.attrs[read[0]]):
            continue  # autocast casts a weight down; torchao's float8 cast first copies a bf16 weight up to float32
        if rank.plan.zero or rank.sharded_weight(weight):
            casts[sid] = itemsize(attrs)
    return casts


def _fp32_gradient_partition(rank: Rank) -> None:
    """DeepSpeed stages 1-2 step on an fp32 copy of the rank's gradient partition (stage_1_and_2.py
    ``single_grad_partition``), made and dropped within each optimizer step."""
    trainable = rank.trainable_weights()
    nbytes = sum(4 * ceil(w.numel / rank.ranks_of(w.name)) for w in rank.weights.values() if w.name in trainable)
    for step, (first, last) in rank.optimizer_span.items():
        rank.add(
            nbytes,
            "temporaries",
            "zero.fp32_grad_partition",
            phase="optimizer",
            step=step,
            alloc_at=rank.at(first, 2),
            free_at=rank.at(last, 3),
        )
