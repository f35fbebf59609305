"""``checkpoint`` of a data-parallel run that saves per rank: DCP (FSDP2, DDP) or DeepSpeed ZeRO's files."""

from __future__ import annotations

import torch

from vramsim.analysis.device_memory import DeviceMemory, device_memory
from vramsim.checkpoints.dcp import dcp_save
from vramsim.checkpoints.deepspeed import deepspeed_files
from vramsim.checkpoints.sharded_restore import sharded_timelines
from vramsim.checkpoints.timelines import checkpoint_timeline
from vramsim.config import SimulationConfig
from vramsim.estimators.assumptions import DCP_CHECKPOINT_PATH, DCP_COPY_AHEAD_BYTES, DEEPSPEED_VERSION
from vramsim.estimators.timeline import Timeline
from vramsim.results.checkpoint import CheckpointFile, CheckpointReport
from vramsim.results.report import Assumption
from vramsim.workload.optimizers import describe_optimizer
from vramsim.workload.program import Program
from vramsim.workload.targets import Target

__all__ = ["sharded_checkpoint"]


def sharded_checkpoint(
    program: Program,
    timeline: Timeline,
    config: SimulationConfig,
    target: Target,
    *,
    dcp: bool,
    async_save: bool,
    train: DeviceMemory,
) -> CheckpointReport:
    """The files every rank writes and one rank's save and restore; ``timeline`` is that rank's training."""
    assert program.optimizer is not None, "a training program has an optimizer (checked by the caller)"
    on_gpu = target.profile.vendor != "cpu"
    if dcp:
        files, save_host, restore_host, loaded = _dcp_files(program, config, on_gpu=on_gpu, async_save=async_save)
    else:
        files, save_host, restore_host, loaded = _deepspeed_files(program, config, on_gpu=on_gpu)
    zeros = None
    if dcp and config.gradient_as_bucket_view:  # .grad views DDP's buckets: a fresh zeros_like per trainable parameter
        zeros = [p.untyped_storage().nbytes() for p in program.model.parameters() if p.requires_grad]
    timelines = sharded_timelines(timeline, dcp=dcp, loaded=loaded, zeros=zeros)
    save = device_memory(timelines.save, target.profile, training=True, world_size=config.gpus)
    restore = device_memory(timelines.restore, target.profile, training=True, world_size=config.gpus)
    capacity = target.profile.memory_bytes
    fits = None if capacity is None else max(restore.device_bytes, train.device_bytes) <= capacity * (1 - config.headroom)
    return CheckpointReport(
        model="",
        target=target.name,
        optimizer=describe_optimizer(program.optimizer),
        files=files,
        disk_bytes=sum(f.bytes for f in files),
        save_format="dcp" if dcp else "deepspeed",
        map_location="cpu",
        save_peak_bytes=save.peak_bytes,
        save_device_bytes=save.device_bytes,
        save_host_bytes=save_host,
        restore_peak_bytes=restore.peak_bytes,
        restore_device_bytes=restore.device_bytes,
        restore_host_bytes=restore_host,
        restore_breakdown=restore.live.breakdown(timelines.restore, restore.peak_index),
        train_device_bytes=train.device_bytes,
        capacity_bytes=capacity,
        headroom=config.headroom,
        fits=fits,
        assumptions=[
            *_assumptions(dcp, async_save, config.gpus),
            *(Assumption(name=o.name, detail=o.source, bytes=o.bytes) for o in restore.overheads),
            *target.notes,
        ],
        save_timeline=checkpoint_timeline(timelines.save, save, target, config.headroom),
        restore_timeline=checkpoint_timeline(timelines.restore, restore, target, config.headroom),
    )


def _dcp_files(
    program: Program, config: SimulationConfig, *, on_gpu: bool, async_save: bool
) -> tuple[list[CheckpointFile], int, int, list[int]]:
    """DCP's files, the host bytes of one rank's save and restore, and what a CPU rank's restore loads."""
    ranks, metadata = dcp_save(program, gpus=config.gpus, sharded=config.fsdp != "no", on_gpu=on_gpu)
    files = [
        CheckpointFile(
            name=f"__{r.rank}_0.distcp",
            bytes=r.file_bytes,
            holds="the rank's shards (DCP)",
            tensor_bytes=r.tensor_bytes,
            rank=r.rank,
        )
        for r in ranks
    ]
    files.append(CheckpointFile(name=".metadata", bytes=metadata, holds="DCP metadata (every chunk's file and offset)"))
    save_host = max(r.staged_bytes if async_save else r.copy_ahead_bytes for r in ranks) if on_gpu else 0
    restore_host = max((max(r.loaded, default=0) for r in ranks), default=0) if on_gpu else 0
    loaded = [] if on_gpu else ranks[0].loaded
    return files, save_host, restore_host, loaded


def _deepspeed_files(
    program: Program, config: SimulationConfig, *, on_gpu: bool
) -> tuple[list[CheckpointFile], int, int, list[int]]:
    """DeepSpeed ZeRO's files and the host bytes of one rank's save and restore (no CPU-rank loads to list: empty)."""
    low = config.mixed_precision if isinstance(config.mixed_precision, torch.dtype) else None
    files, largest = deepspeed_files(
        program, config.sharding, weight_dtype=low, bf16=low == torch.bfloat16, device="cuda:0" if on_gpu else "cpu"
    )
    save_host = largest if on_gpu else 0
    module = sum(f.tensor_bytes for f in files if "model_states" in f.name and f.rank in (None, 0))
    optim = max(f.tensor_bytes for f in files if "optim_states" in f.name)
    restore_host = module + optim if on_gpu else 0
    return files, save_host, restore_host, []


def _assumptions(dcp: bool, async_save: bool, gpus: int) -> list[Assumption]:
    if dcp:
        return [
            Assumption(
                name="dcp_layout",
                detail=f"dcp.{'async_save' if async_save else 'save'}({{'model': ..., 'optim': ...}}) "
                "of get_state_dict(model, optimizer) with DCP's defaults: FileSystemWriter, one thread, one file per "
                f"rank ({gpus} ranks), DefaultSavePlanner (replicated items on the least loaded rank), saved to "
                f"{DCP_CHECKPOINT_PATH!r}",
            ),
            Assumption(
                name="dcp_host",
                detail="async_save stages the rank's whole state dict in host memory (DCP's default "
                "stager); a synchronous save from a GPU copies ahead up to per_thread_copy_ahead",
                bytes=DCP_COPY_AHEAD_BYTES,
            ),
            Assumption(
                name="restore_path",
                detail="a fresh model and optimizer: get_state_dict runs _init_optim_state (a step "
                "on zero gradients, the traced first optimizer step), dcp.load copies each tensor in place from the "
                "host, set_state_dict adds nothing",
            ),
        ]
    return [
        Assumption(
            name="deepspeed_layout",
            detail=f"DeepSpeed {DEEPSPEED_VERSION} engine.save_checkpoint under ZeRO: the "
            "module states file (rank 0, or every rank under ZeRO-3) and each rank's optimizer partition; the pickled "
            "DeepSpeedConfig, loss scaler and param_slice_mappings (a few KB a file), `latest` and zero_to_fp32.py "
            "are not counted; no DeepSpeed LR scheduler",
        ),
        Assumption(
            name="restore_path",
            detail="engine.load_checkpoint into a fresh engine (no optimizer states until "
            "loaded): the module file and the rank's optimizer file loaded on the host, states made on the device "
            "by the inner optimizer's load_state_dict",
        ),
    ]
