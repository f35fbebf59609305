"""From one rank's parallelism what-ifs to the report: the rank's figures and the assumptions behind them."""

from __future__ import annotations

from vramsim.estimators import assumptions as a
from vramsim.estimators.pipeline_schedule import PipelinePlan
from vramsim.estimators.sharding import Sharded, ShardingPlan
from vramsim.estimators.timeline import Timeline
from vramsim.results.report import Assumption, PlacedDevice, RankMemory, StageMemory
from vramsim.workload.parallel.expert import EP_NOT_TRACED
from vramsim.workload.parallel.tensor import TP_NOT_TRACED

__all__ = ["held_state", "model_parallel_notes", "rank_memory", "sharding_notes"]


def rank_memory(
    sharded: Sharded | None,
    timeline: Timeline,
    *,
    gpus: int,
    tp: int,
    pipeline: PipelinePlan,
    stages: list[StageMemory],
    ep: int = 1,
    cp: int = 1,
    exchange_bytes: int = 0,
    devices: list[PlacedDevice] | None = None,
    device_map: str | None = None,
) -> RankMemory:
    """The report's ``ranks``: the data-parallel rank ``sharded`` describes, or one tensor- or expert-parallel
    rank of ``timeline``; with a pipeline, the busiest stage's (``stages`` lists every stage); with a device map,
    the busiest GPU's (``devices`` lists every GPU)."""
    devices = devices or []
    parts = [f"device_map {device_map}"] if devices else []
    parts += [f"TP {tp}"] if tp > 1 else []
    parts += [f"EP {ep}"] if ep > 1 else []
    parts += [f"CP {cp}"] if cp > 1 else []
    if pipeline.active:
        parts.append(f"PP {pipeline.stages} {pipeline.schedule} ({pipeline.micro_batches} micro-batches)")
    if sharded is not None and not parts:
        parts.append(sharded.plan.scheme)
    elif sharded is not None:  # data parallelism over the model-parallel groups
        parts.append(f"{sharded.plan.scheme} {sharded.plan.gpus}")
    busiest = max(stages, key=lambda stage: stage.device_bytes).rank if stages else None
    busiest_device = max(devices, key=lambda device: device.device_bytes).device if devices else None
    held = held_state(timeline) if sharded is None or pipeline.active else dict(sharded.model_state)
    return RankMemory(
        scheme=" x ".join(parts),
        gpus=gpus,
        ranks_alike=not pipeline.active and not devices,
        model_state=held,
        gathered_elements=sharded.gathered_elements if sharded else 0,
        buffers=(dict(sharded.buffers) if sharded else {}) | _exchange(exchange_bytes, cp),
        tp=tp,
        ep=ep,
        cp=cp,
        pp=pipeline.stages,
        stages=stages,
        busiest_stage=busiest,
        host=dict(sharded.host) if sharded else {},
        devices=devices,
        busiest_device=busiest_device,
    )


def _exchange(nbytes: int, cp: int) -> dict[str, int]:
    name = "CP K/V ring (3 chunks, largest attention)" if cp > 1 else "EP all-to-all buffer (2 per exchange)"
    return {name: nbytes} if nbytes else {}


def held_state(timeline: Timeline) -> dict[str, int]:
    """Weights (as held, not gathered), optimizer states and the last step's gradients on ``timeline``, as allocated."""
    last_step = len(timeline.steps) - 1
    state = dict.fromkeys(("parameters", "gradients", "optimizer_states"), 0)
    for block in timeline.blocks:
        if (
            (block.category == "parameters" and block.op != "all_gather")
            or block.category == "optimizer_states"
            or (block.category == "gradients" and block.step in (-1, last_step))
        ):
            state[block.category] += block.nbytes
    return state


def model_parallel_notes(tp: int, pipeline: PipelinePlan, ep: int = 1, cp: int = 1) -> list[Assumption]:
    """What the tensor-, expert-, context- and pipeline-parallel figures rest on."""
    notes = []
    if cp > 1:
        notes.append(
            Assumption(
                name="context_parallel_rank",
                detail=f"one of {cp} context-parallel ranks traced on its seq_len / {cp} tokens (torch's context_parallel, "
                "round-robin chunks for causal balance); in each SDPA call the K/V ring holds three chunks (the one "
                "received last, the copy sent on, the buffer receiving the next) and the merger a float32 output and "
                "logsumexp; in backward the same ring, float32 accumulators for the gradients of q, k, v and the K/V "
                "gradients' ring, sent and received in float32 (torch 2.13 _templated_ring_attention and "
                "_templated_ring_attention_backward); the merge's output-sized temporaries are not counted; weights are "
                "whole on each rank unless --zero/--fsdp shard them over the dp x cp ranks, as torchtitan does",
            )
        )
    if ep > 1:
        notes.append(
            Assumption(
                name="expert_parallel_rank",
                detail=f"one of {ep} expert-parallel ranks traced as the decoder it runs: num_experts / {ep} experts with "
                "the same top_k, the rest whole (torchtitan ExpertParallel shards expert weights on dim 0); under balanced "
                "routing each local expert gets ep x tokens x top_k / num_experts rows, as that program gives them; each "
                "experts call's dispatch and combine all-to-all (all_to_all_single_autograd, _permute/_unpermute) adds "
                "two buffers of the routed rows for its moment, in forward and in backward; the expert-parallel ranks are "
                "data-parallel ranks (torchtitan's EP within dp_shard, DeepSpeed-MoE's expert-data-parallel groups): the "
                "experts' states are replicated or sharded over the dp / ep ranks holding the same experts, the rest over "
                "every data-parallel rank; under FSDP2 the experts are a group of their own inside each block, gathered "
                "around their call (torchtitan's apply_fsdp, dim 1 where the rank's experts are fewer than that group); "
                + EP_NOT_TRACED,
            )
        )
    if tp > 1:
        notes.append(
            Assumption(
                name="tensor_parallel_rank",
                detail=f"one of {tp} tensor-parallel ranks traced as the decoder it runs: heads, kv heads, intermediate size "
                "and vocabulary divided by tp (rank 0's vocabulary slice, the largest), hidden size and norms whole "
                "(Megatron's split, DTensor ColwiseParallel/RowwiseParallel with loss_parallel); in a MoE decoder each "
                "expert's intermediate size divided by tp, the router and a shared expert whole (transformers' "
                "base_model_tp_plan, moe_tp_experts); " + TP_NOT_TRACED,
            )
        )
    if pipeline.active:
        notes.append(
            Assumption(
                name="pipeline_stages",
                detail=f"{pipeline.stages} stages of equal layer counts, embedding on the first, final norm, head and loss "
                f"on the last; {pipeline.schedule} with {pipeline.micro_batches} micro-batches of --batch-size "
                "sequences: a stage holds its activations for the micro-batches in flight at its busiest backward "
                "(torch.distributed.pipelining schedules.py), copies of one traced micro-batch's held across the traced "
                "backward, the gradients of the earlier micro-batches beside them; pipelining's receive buffers (one per "
                "micro-batch for each activation received and each gradient of what it sends), the input gradients it "
                "keeps to the next step and a stage's outputs kept for their backward (stage.py); the last stage's "
                "output_chunks are not counted; a tied embedding is held, with its gradient and optimizer states, on the "
                "first stage and the last",
            )
        )
    return notes


_OFFLOAD = (
    "DeepSpeed ZeRO-Offload (stage_1_and_2.py, stage3.py): the fp32 master partition, the fp32 gradient partition and "
    "the optimizer states on the host, the step on the CPU; offload_param (ZeRO-3) also the weights' partitions, "
    "gathered to the device around each use; stages 1-2 keep a device buffer of the largest weight's size "
    "(temp_grad_buffer_for_gpu_offload)",
    "FSDP2 CPUOffloadPolicy (_fsdp_param.py): the weights', gradients' and optimizer states' shards on the host, the "
    "step on the CPU; each shard is copied to the device before its all-gather and each gradient shard to the host "
    "after its reduce-scatter",
)


def sharding_notes(sharded: Sharded) -> list[Assumption]:
    """Every figure and policy the rank's memory rests on, with its source."""
    plan = sharded.plan
    return [
        _data_parallel_note(plan),
        *_ddp_notes(plan, sharded.buffers),
        *_zero_notes(plan, sharded.buffers),
        *_fsdp_notes(plan),
        *_offload_notes(sharded),
        *(Assumption(name="sharding", detail=note) for note in sharded.notes),
    ]


def _data_parallel_note(plan: ShardingPlan) -> Assumption:
    """How the data-parallel ranks relate: alike, or each pipeline stage's group over its own weights."""
    return (
        Assumption(
            name="pipeline_data_parallel",
            detail=f"{plan.scheme} over the {plan.gpus} data-parallel ranks of each pipeline stage, on that stage's "
            "weights (Megatron's and torchtitan's 3-D layout); gradients accumulate over the micro-batches and are "
            "reduced after the last one's backward (torch.distributed.pipelining perform_reduce_grad, DeepSpeed's "
            "PipelineEngine _exec_reduce_grads): FSDP2 keeps the stage's weights gathered and its gradients whole "
            "until then; ZeRO-1 is DeepSpeed's stage 1 under its PipelineEngine, as Megatron's distributed "
            "optimizer shards it (weights and gradients whole, fp32 master and optimizer states 1/dp)",
        )
        if plan.pipelined
        else Assumption(
            name="data_parallel_ranks_alike",
            detail=f"{plan.scheme} over {plan.gpus} GPUs is pure data parallelism: every rank runs the same program on "
            "its own micro-batch and holds the same bytes, so the figures are one rank's",
        )
    )


def _ddp_notes(plan: ShardingPlan, buffers: dict[str, int]) -> list[Assumption]:
    """DDP's gradient buckets."""
    notes = []
    if plan.scheme == "DDP":
        notes.append(
            Assumption(
                name="ddp_gradient_buckets",
                detail=f"DDP's Reducer fills flat gradient buckets in reverse parameter order, the first "
                f"{a.DDP_FIRST_BUCKET_BYTES >> 20} MiB, the others bucket_cap_mb={a.DDP_BUCKET_CAP_BYTES >> 20} "
                "(torch/nn/parallel/distributed.py), made when DDP wraps the model and kept for the run; "
                + (
                    "gradient_as_bucket_view=True: each .grad is a view into its bucket, so they are the gradients"
                    if plan.bucket_view
                    else "gradient_as_bucket_view=False (DDP's default) keeps .grad apart from them"
                ),
                bytes=sum(buffers.values()),
            )
        )
    return notes


def _zero_notes(plan: ShardingPlan, buffers: dict[str, int]) -> list[Assumption]:
    """DeepSpeed ZeRO's fp32 master copy and reduce bucket, and ZeRO-3's gathers."""
    notes = []
    if plan.zero:
        notes.append(
            Assumption(
                name="zero_master_and_reduce_bucket",
                detail="the optimizer updates an fp32 copy of the rank's partition (stages 1-2 always; stage 3 when the "
                "weights are not fp32), counted with the weights; "
                f"DeepSpeed reduce_bucket_size={plan.zero_settings.reduce_bucket:.0e} elements in the gradients' "
                "dtype (zero/config.py default 5e8, or the ds_config's); stages 1-2 hold it through backward "
                "(overlap_comm off by default: one buffer), stage 3 from start-up; allgather_bucket_size adds nothing "
                "(in-place all-gather)",
                bytes=buffers.get("ZeRO reduce bucket", 0),
            )
        )
    if plan.zero == 3:
        notes.append(
            Assumption(
                name="zero3_gather",
                detail=f"ZeRO-3 gathers a block's weights around its forward and its backward and prefetches "
                f"stage3_prefetch_bucket_size={plan.zero_settings.prefetch_bucket:.0e} elements of the next; weights "
                f"under stage3_param_persistence_threshold={plan.zero_settings.param_persistence_threshold:.0e} elements stay "
                "whole; weights outside the blocks stay gathered from forward to the end of backward; each weight is "
                "padded to a multiple of the ranks (partition_parameters.py _padding_size); gradients reduce into a flat "
                "buffer of the rank's partitions made at start-up (stage3.py grad_partitions_flat_buffer)",
            )
        )
    return notes


def _fsdp_notes(plan: ShardingPlan) -> list[Assumption]:
    """FSDP2's per-block gathers and reduce-scatters, and HSDP's shard groups."""
    notes = []
    if plan.fsdp != "no":
        notes.append(
            Assumption(
                name="fsdp2_per_block",
                detail=f"fully_shard on each block and on the root; shards by {a.FSDP2_SHARD_RULE}; a block's weights are "
                "all-gathered into a flat output and copied out (in forward the output waits for the next block's "
                "copy-out, in backward the next block is prefetched); reshard_after_forward="
                f"{plan.reshards_after_forward}; the root stays gathered from forward to the end of backward; "
                "a block's gradients go through a reduce-scatter input freed when the next block's reduce begins (torch 2.13 "
                "_fsdp_param_group.py)",
            )
        )
    if plan.fsdp == "hybrid":
        notes.append(
            Assumption(
                name="hsdp_shard_groups",
                detail=f"HSDP (fully_shard with a 2-D mesh, replicate x shard = {plan.replicas} x {plan.shard_size}): model "
                f"states sharded over the {plan.shard_size} ranks of a shard group, replicated across the {plan.replicas} "
                "groups; the gradients' shards are all-reduced across replicas in place after the reduce-scatter "
                "(_fsdp_collectives.py foreach_reduce), adding no buffer",
            )
        )
    return notes


def _offload_notes(sharded: Sharded) -> list[Assumption]:
    """The model states offloaded to host memory."""
    plan = sharded.plan
    notes = []
    if plan.offload != "none":
        notes.append(
            Assumption(
                name="cpu_offload_states",
                detail="host memory, not device memory: "
                + ", ".join(f"{k} {v:,} B" for k, v in sharded.host.items())
                + "; "
                + _OFFLOAD[plan.fsdp != "no"]
                + "; the host step's own temporaries and pinned-memory rounding "
                "are not counted",
                bytes=sum(sharded.host.values()),
            )
        )
    return notes
