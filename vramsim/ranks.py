"""From one rank's sharding what-if to the report: the rank's figures and the assumptions behind them."""

from __future__ import annotations

from vramsim.estimators import assumptions as a
from vramsim.estimators.sharding import Sharded

from .report import Assumption, RankMemory

__all__ = ["rank_memory", "sharding_notes"]


def rank_memory(sharded: Sharded) -> RankMemory:
    """The report's ``ranks``: pure data parallelism gives every rank the same program."""
    return RankMemory(scheme=sharded.plan.scheme, gpus=sharded.plan.gpus, ranks_alike=True,
                      model_state=dict(sharded.model_state), gathered_elements=sharded.gathered_elements,
                      buffers=dict(sharded.buffers))  # fmt: skip


def sharding_notes(sharded: Sharded, *, autocast: bool) -> list[Assumption]:
    """Every figure and policy the rank's memory rests on, with its source; ``autocast``: the program
    casts weights under torch.autocast."""
    plan = sharded.plan
    buffers = sharded.buffers
    notes = [
        Assumption(
            name="data_parallel_ranks_alike",
            detail=f"{plan.scheme} over {plan.gpus} GPUs is pure data parallelism: every rank runs the same program on "
            "its own micro-batch and holds the same bytes, so the figures are one rank's",
        )
    ]
    if plan.scheme == "DDP":
        notes.append(Assumption(
            name="ddp_gradient_buckets",
            detail=f"DDP's Reducer fills flat gradient buckets in reverse parameter order, the first "
            f"{a.DDP_FIRST_BUCKET_BYTES >> 20} MiB, the others bucket_cap_mb={a.DDP_BUCKET_CAP_BYTES >> 20} "
            "(torch/nn/parallel/distributed.py), made when DDP wraps the model and kept for the run; "
            + ("gradient_as_bucket_view=True: each .grad is a view into its bucket, so they are the gradients"
               if plan.bucket_view else "gradient_as_bucket_view=False (DDP's default) keeps .grad apart from them"),
            bytes=sum(buffers.values()),
        ))  # fmt: skip
    if plan.zero:
        notes.append(Assumption(
            name="zero_master_and_reduce_bucket",
            detail="the optimizer updates an fp32 copy of the rank's partition (stages 1-2 always; stage 3 when the "
            "weights are not fp32), counted with the weights; "
            f"DeepSpeed reduce_bucket_size={a.DEEPSPEED_REDUCE_BUCKET_ELEMENTS:.0e} elements in the gradients' "
            "dtype (zero/config.py default); stages 1-2 hold it through backward (overlap_comm off by default: one "
            "buffer), stage 3 from start-up; allgather_bucket_size adds nothing (in-place all-gather)",
            bytes=buffers.get("ZeRO reduce bucket", 0),
        ))  # fmt: skip
    if plan.zero == 3:
        notes.append(Assumption(
            name="zero3_gather",
            detail=f"ZeRO-3 gathers a block's weights around its forward and its backward and prefetches "
            f"stage3_prefetch_bucket_size={a.DEEPSPEED_PREFETCH_BUCKET_ELEMENTS:.0e} elements of the next; weights "
            f"under stage3_param_persistence_threshold={a.DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD:.0e} elements stay "
            "whole; weights outside the blocks stay gathered from forward to the end of backward; each weight is "
            "padded to a multiple of the ranks (partition_parameters.py _padding_size); gradients reduce into a flat "
            "buffer of the rank's partitions made at start-up (stage3.py grad_partitions_flat_buffer)",
        ))  # fmt: skip
    if plan.fsdp != "no":
        notes.append(Assumption(
            name="fsdp2_per_block",
            detail=f"fully_shard on each block and on the root; shards by {a.FSDP2_SHARD_RULE}; a block's weights are "
            "all-gathered into a flat output and copied out (in forward the output waits for the next block's "
            "copy-out, in backward the next block is prefetched); reshard_after_forward="
            f"{plan.fsdp == 'full'}; the root stays gathered from forward to the end of backward; a block's gradients "
            "go through a reduce-scatter input freed when the next block's reduce begins (torch 2.13 "
            "_fsdp_param_group.py)",
        ))  # fmt: skip
    if autocast and plan.shards_parameters:
        notes.append(Assumption(
            name="autocast_casts_gathered_weights",
            detail="the traced program keeps fp32 weights and casts them under torch.autocast, whose cache holds the "
            "cast copy of every weight a forward used until the forward ends (temporaries, aten._to_copy): with "
            "sharded weights those copies are whole; DeepSpeed's bf16 mode and FSDP2's MixedPrecisionPolicy gather "
            "bf16 weights instead (not modelled)",
        ))  # fmt: skip
    notes.extend(Assumption(name="sharding", detail=note) for note in sharded.notes)
    return notes
