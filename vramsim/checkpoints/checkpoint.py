"""``checkpoint``: what a training checkpoint takes on disk, and the memory of saving and restoring it."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from vramsim.analysis.device_memory import DeviceMemory, device_memory
from vramsim.analysis.traced import build_and_trace
from vramsim.analysis.whatifs import Analysis
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.checkpoints.choices import CheckpointChoice, Layout, MapLocation, checkpoint_choice
from vramsim.checkpoints.files import SavedCheckpoint, save_torch_checkpoint, save_trainer_checkpoint
from vramsim.checkpoints.restore import restore_timelines
from vramsim.checkpoints.sharded import sharded_checkpoint
from vramsim.checkpoints.timelines import checkpoint_timeline
from vramsim.config import SimulationConfig
from vramsim.estimators.assumptions import TRAINER_LOG_HISTORY
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.results.checkpoint import CheckpointReport
from vramsim.results.report import Assumption
from vramsim.tracer.graph import build_graph
from vramsim.workload.attention import check_attention
from vramsim.workload.models import ModelSource, model_name, with_model_defaults
from vramsim.workload.optimizers import check_target, describe_optimizer
from vramsim.workload.program import Program
from vramsim.workload.targets import Target, resolve_target

__all__ = ["checkpoint"]


def checkpoint(
    model: ModelSource,
    *,
    save_format: str | None = None,
    map_location: str | None = None,
    async_save: bool = False,
    cache: bool | ResultCache = True,
    **options: Any,
) -> CheckpointReport:
    """Trace one training step of ``model`` (``options`` as ``simulate`` takes them), then save the traced
    state and restore it.

    ``save_format``: ``trainer``, the Hugging Face Trainer's folder (safetensors weights, optimizer.pt...)
    restored as its ``resume_from_checkpoint`` does; ``torch``, the plain loop's
    ``torch.save({"model": ..., "optimizer": ...})`` restored by ``torch.load`` and both ``load_state_dict``;
    ``dcp``, ``torch.distributed.checkpoint`` of ``get_state_dict(model, optimizer)``, each rank its own file
    (the default with ``fsdp``; DDP too); ``deepspeed``, ``engine.save_checkpoint`` under ZeRO (the default
    with ``zero``). ``async_save``: ``dcp.async_save``, which stages each rank's state in host memory.
    ``map_location``: where ``torch.load`` puts what it loads, ``cpu`` or ``device``; none given: the
    Trainer's choice (``cpu`` on one GPU, the device when ``gpus`` > 1), or torch.load's own for ``torch``
    (each tensor back on the device it was saved from). ``cache`` as ``simulate`` takes it: the same request again
    is answered from the result cache.

    >>> report = checkpoint("gpt2", seq_len=16, device="cpu")
    >>> [f.name for f in report.files if f.name.endswith((".safetensors", ".pt"))]
    ['model.safetensors', 'optimizer.pt', 'scheduler.pt']
    """
    options = with_model_defaults(model, options)
    config = SimulationConfig.from_options(**options)
    choice = checkpoint_choice(config, save_format, map_location, async_save)
    return cached_answer(
        cache,
        CheckpointReport,
        lambda: request_key("checkpoint", model, options, choice=choice, async_save=async_save),
        lambda: _checkpointed(model, config, choice, async_save),
    )


def _checkpointed(model: ModelSource, config: SimulationConfig, choice: CheckpointChoice, async_save: bool) -> CheckpointReport:
    """``checkpoint``'s answer: the step traced, its state saved and restored."""
    target = resolve_target(config.device)
    check_attention(config.attn_implementation, target.profile)
    check_target(config.optimizer, target.profile.vendor)
    started = time.perf_counter()
    program, _, trace = build_and_trace(model, config, target, checkpointing="marked")
    analysis = Analysis(build_graph(trace), target, config)
    outcome = analysis.run(parse_checkpointing(config.checkpointing))
    if choice.save_format in ("dcp", "deepspeed"):
        report = sharded_checkpoint(
            program,
            outcome.timeline,
            config,
            target,
            dcp=choice.save_format == "dcp",
            async_save=async_save,
            train=outcome.memory,
        )
        return dataclasses.replace(report, model=model_name(model), trace_seconds=round(time.perf_counter() - started, 3))
    return _unsharded_checkpoint(model, program, outcome.memory, config, target, choice.layout, choice.location, started)


def _unsharded_checkpoint(
    model: ModelSource,
    program: Program,
    train: DeviceMemory,
    config: SimulationConfig,
    target: Target,
    layout: Layout,
    location: MapLocation,
    started: float,
) -> CheckpointReport:
    """The Trainer's folder or the plain loop's torch.save: its files, and the memory of saving and restoring them."""
    host = target.profile.vendor == "cpu"
    device = "cpu" if host else "cuda:0"
    if layout == "trainer":
        saved = save_trainer_checkpoint(program, device=device, gpus=config.gpus)
    else:
        saved = save_torch_checkpoint(program, device=device)
    timelines = restore_timelines(program, layout=layout, map_location=location, host_is_device=host, shards=saved.shards)
    save = device_memory(timelines.save, target.profile, training=True)
    restore = device_memory(timelines.restore, target.profile, training=True)
    capacity = target.profile.memory_bytes
    fits = None if capacity is None else max(restore.device_bytes, train.device_bytes) <= capacity * (1 - config.headroom)
    assert program.optimizer is not None, "a training program has an optimizer (checked above)"
    return CheckpointReport(
        model=model_name(model),
        target=target.name,
        optimizer=describe_optimizer(program.optimizer),
        files=saved.files,
        disk_bytes=sum(f.bytes * f.copies for f in saved.files),
        save_format=layout,
        map_location=location,
        save_peak_bytes=save.peak_bytes,
        save_device_bytes=save.device_bytes,
        save_host_bytes=0 if host else _save_host_bytes(saved, layout),
        restore_peak_bytes=restore.peak_bytes,
        restore_device_bytes=restore.device_bytes,
        restore_host_bytes=0 if host else timelines.restore_host_bytes,
        restore_breakdown=restore.live.breakdown(timelines.restore, restore.peak_index),
        train_device_bytes=train.device_bytes,
        capacity_bytes=capacity,
        headroom=config.headroom,
        fits=fits,
        assumptions=_assumptions(target, restore.overheads, layout),
        trace_seconds=round(time.perf_counter() - started, 3),
        save_timeline=checkpoint_timeline(timelines.save, save, target, config.headroom),
        restore_timeline=checkpoint_timeline(timelines.restore, restore, target, config.headroom),
    )


def _save_host_bytes(saved: SavedCheckpoint, layout: Layout) -> int:
    """What a save from the device holds on the host at once: safetensors copies a whole weights file's tensors
    (``_flatten_as_ptr`` keeps each ``tensor.to("cpu")``); ``torch.save`` copies one storage at a time (``_save``)."""
    weights = map(sum, saved.shards) if layout == "trainer" else (size for sizes in saved.shards for size in sizes)
    return max([*weights, *saved.optimizer_storages])


def _assumptions(target: Target, overheads: list[Any], layout: Layout) -> list[Assumption]:
    from vramsim.estimators.assumptions import TRAINING_ARGS_BYTES

    if layout == "torch":
        saved = [
            Assumption(
                name="torch_layout",
                detail='one file, torch.save({"model": model.state_dict(), "optimizer": '
                'optimizer.state_dict()}, "checkpoint.pt")',
            ),
            Assumption(
                name="restore_path",
                detail='ckpt = torch.load("checkpoint.pt", map_location); '
                'model.load_state_dict(ckpt["model"]) copies in place; optimizer.load_state_dict(ckpt["optimizer"]) '
                "makes each state by torch's _process_value_according_to_param_policy; ckpt is dropped after both",
            ),
        ]
    else:
        saved = [
            Assumption(
                name="trainer_layout",
                detail="the folder transformers' Trainer._save_checkpoint writes: "
                "save_pretrained (safetensors, 50GB shards) or peft's adapter files, optimizer.pt, scheduler.pt "
                "(linear schedule), rng_state.pth, trainer_state.json, training_args.bin",
            ),
            Assumption(name="trainer_state", detail=TRAINER_LOG_HISTORY),
            Assumption(
                name="training_args", detail="training_args.bin as pickled with transformers' defaults", bytes=TRAINING_ARGS_BYTES
            ),
            Assumption(
                name="restore_path",
                detail="Trainer.resume_from_checkpoint: weights loaded on the host and "
                "copied in place; optimizer.load_state_dict(torch.load(optimizer.pt, map_location)), each state "
                "made by torch's _process_value_according_to_param_policy (cast to the parameter's dtype)",
            ),
        ]
    process = Assumption(
        name="restore_process",
        detail="the save and the restore are counted in the process that "
        "trains: its CUDA context and cuBLAS workspaces as a training step leaves them",
    )
    return [*saved, process, *(Assumption(name=o.name, detail=o.source, bytes=o.bytes) for o in overheads), *target.notes]
