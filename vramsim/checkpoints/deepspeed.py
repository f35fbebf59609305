"""What ``DeepSpeedEngine.save_checkpoint`` writes under ZeRO, per rank, laid out from DeepSpeed 0.19.8's source.

- ``mp_rank_00_model_states.pt`` (runtime/engine.py ``_save_checkpoint``, ``_common_checkpoint_state``): the
  module's state dict in the engine's weight dtype (bf16/fp16 in DeepSpeed's mixed precision), parameter
  names and shapes, and, from stage 2 on (``zero_optimization_partition_gradients``), every frozen parameter
  again (``frozen_param_fragments``, on the host). Written by data-parallel rank 0 for stages 1-2; under
  ZeRO-3 each rank writes ``zero_pp_rank_{r}_mp_rank_00_model_states.pt``, whose module state dict holds
  0-element placeholders for partitioned weights (``free_param``) and whole ones under
  ``stage3_param_persistence_threshold``, and whose frozen fragments are the rank's partitions (``ds_tensor``).
- ``[bf16_]zero_pp_rank_{r}_mp_rank_00_optim_states.pt`` (``_save_zero_checkpoint``), each rank's optimizer:
  stages 1-2 (zero/stage_1_and_2.py ``state_dict``): the inner optimizer's state over one flat fp32 partition
  per parameter group (the group padded to a multiple of 2 x ranks, then split), and the fp32 master
  partitions without the padding (on the last rank); stage 3 (zero/stage3.py ``_rigid_state_dict``): the same
  over sub-groups of ``sub_group_size`` elements, each parameter padded to ``ceil(numel / ranks)``.

Each file's bytes are ``torch.save`` of that layout (tensors as FakeTensors under ``skip_data``, plain fields
as DeepSpeed stores them). Not counted: the pickled ``DeepSpeedConfig`` (``ds_config``), loss scaler and
``param_slice_mappings`` objects, a few kilobytes per file; the ``latest`` tag file and ``zero_to_fp32.py``.
"""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from math import ceil
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from vramsim.checkpoints.files import fake_on_device
from vramsim.estimators.assumptions import DEEPSPEED_SUB_GROUP_ELEMENTS, DEEPSPEED_VERSION
from vramsim.estimators.sharding import ShardingPlan
from vramsim.results.checkpoint import CheckpointFile
from vramsim.tracer.leaves import tensor_leaves
from vramsim.workload.program import Program

__all__ = ["deepspeed_files"]

_ALIGNMENT = 2
"""``nccl_start_alignment_factor`` (stage_1_and_2.py): each group is padded to a multiple of 2 x ranks."""


def deepspeed_files(
    program: Program, plan: ShardingPlan, *, weight_dtype: torch.dtype | None, bf16: bool, device: str
) -> tuple[list[CheckpointFile], int]:
    """Every file of the checkpoint's tag folder, one per rank where each rank writes one, and the largest
    storage in them (``torch.save`` copies one at a time to the host). ``weight_dtype``: DeepSpeed's bf16/fp16
    mode (``None``: the traced weights' dtype); ``bf16`` names the optimizer files."""
    assert program.optimizer is not None, "a checkpoint is taken of a training program"
    model, n = program.model, plan.gpus
    trainable = ([p for p in group["params"] if p.requires_grad] for group in program.optimizer.param_groups)
    groups = [group for group in trainable if group]
    names = {id(p): name for name, p in model.named_parameters()}
    prefix = "bf16_" if bf16 else ""
    files: list[CheckpointFile] = []
    largest = [0]
    with tempfile.TemporaryDirectory() as folder:
        for rank in range(n if plan.zero == 3 else 1):
            name = f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt" if plan.zero == 3 else "mp_rank_00_model_states.pt"
            state = _model_states(program, plan, groups, names, weight_dtype)
            files.append(_saved(Path(folder) / name, state, device, rank, "module states (DeepSpeed)", largest))
        for rank in range(n):
            optim = _zero3_optimizer(program, groups, n) if plan.zero == 3 else _zero12_optimizer(program, plan, groups, rank)
            state = {"optimizer_state_dict": optim, "ds_version": DEEPSPEED_VERSION}
            name = f"{prefix}zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
            files.append(_saved(Path(folder) / name, state, device, rank, "optimizer partition (DeepSpeed ZeRO)", largest))
    return files, largest[0]


def _saved(path: Path, state: dict[str, Any], device: str, rank: int, holds: str, largest: list[int]) -> CheckpointFile:
    """``torch.save`` of ``state`` with its meta tensors standing for ``device`` (host ones stay on the host);
    ``largest`` keeps the largest storage seen."""
    storages = {t.untyped_storage()._cdata: t.untyped_storage().nbytes() for t in tensor_leaves(state)}
    with torch.serialization.skip_data(materialize_fake_tensors=True):
        torch.save(fake_on_device(state, device), path)
    data = sum(storages.values())
    largest[0] = max(largest[0], *storages.values(), 0)
    return CheckpointFile(name=path.name, bytes=path.stat().st_size, holds=holds, tensor_bytes=data, rank=rank)


def _model_states(
    program: Program,
    plan: ShardingPlan,
    groups: list[list[torch.nn.Parameter]],
    names: dict[int, str],
    weight_dtype: torch.dtype | None,
) -> dict[str, Any]:
    """``_common_checkpoint_state``: the module's state dict and what describes the flat groups."""
    model, n = program.model, plan.gpus
    threshold = plan.zero_settings.param_persistence_threshold
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    module: dict[str, torch.Tensor] = OrderedDict()
    made: dict[int, torch.Tensor] = {}  # tied weights are one storage, saved once
    for key, tensor in model.state_dict().items():
        dtype = weight_dtype if key in params and weight_dtype is not None and tensor.is_floating_point() else tensor.dtype
        placeholder = plan.zero == 3 and key in params and tensor.numel() > threshold
        storage = tensor.untyped_storage()._cdata
        if storage not in made:
            made[storage] = torch.empty(0 if placeholder else tensor.shape, dtype=dtype, device="meta")
        module[key] = made[storage]
    frozen = [(name, p) for name, p in model.named_parameters() if not p.requires_grad]
    partitioned = plan.zero >= 2
    host = FakeTensorMode()

    def fragment(param: torch.nn.Parameter) -> torch.Tensor:  # ``param.ds_tensor.cpu()`` or ``param.cpu()``
        with host:
            return torch.empty(ceil(param.numel() / n) if plan.zero == 3 else param.shape, dtype=weight_dtype or param.dtype)

    return {
        "module": module,
        "buffer_names": [name for name, _ in model.named_buffers()],
        "optimizer": None,
        "param_shapes": [OrderedDict((names[id(p)], p.shape) for p in group) for group in groups],
        "frozen_param_shapes": OrderedDict((name, p.shape) for name, p in frozen) if partitioned else None,
        "shared_params": {},
        "frozen_param_fragments": OrderedDict((name, fragment(p)) for name, p in frozen) if partitioned else None,
        "lr_scheduler": None,
        "data_sampler": None,
        "random_ltd": None,
        "skipped_steps": 0,
        "global_steps": 1,
        "global_samples": 1,
        "dp_world_size": n,
        "mp_world_size": 1,
        "ds_version": DEEPSPEED_VERSION,
    }


def _inner_state(program: Program, group: list[torch.nn.Parameter], numel: int) -> dict[str, Any]:
    """The wrapped torch optimizer's state for one flat fp32 partition of ``numel`` elements, keyed as the
    traced optimizer keys its parameters' state (a tensor shaped like the parameter becomes flat)."""
    assert program.optimizer is not None
    state = program.optimizer.state.get(group[0], {})
    flat = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and value.shape == group[0].shape:
            flat[key] = torch.empty(numel, dtype=torch.float32 if value.is_floating_point() else value.dtype, device="meta")
        else:
            flat[key] = value
    return flat


def _param_groups(program: Program, count: int) -> list[dict[str, Any]]:
    assert program.optimizer is not None
    hyper = {k: v for k, v in program.optimizer.param_groups[0].items() if k != "params"}
    return [{**hyper, "params": [i]} for i in range(count)]


def _zero12_optimizer(program: Program, plan: ShardingPlan, groups: list[list[torch.nn.Parameter]], rank: int) -> dict[str, Any]:
    """stage_1_and_2.py ``state_dict`` (rigid, the default): padded partitions, then the lean fp32 master."""
    n = plan.gpus
    sizes, paddings = [], []
    for group in groups:
        total = sum(p.numel() for p in group)
        aligned = ceil(total / (_ALIGNMENT * n)) * _ALIGNMENT * n
        sizes.append(aligned // n)
        paddings.append(aligned - total if rank == n - 1 else 0)
    state = {i: _inner_state(program, group, size) for i, (group, size) in enumerate(zip(groups, sizes, strict=True))}
    inner = {"state": state, "param_groups": _param_groups(program, len(groups))}
    lean = [torch.empty(size - pad, device="meta") for size, pad in zip(sizes, paddings, strict=True)]
    return {
        "dynamic_loss_scale": False,
        "overflow": False,
        "clip_grad": 0.0,
        "base_optimizer_state": inner,
        "single_partition_of_fp32_groups": lean,
        "zero_stage": plan.zero,
        "group_paddings": paddings,
        "param_alignment_paddings": [[0] * len(group) for group in groups],
        "partition_count": [n] * len(groups),
        "ds_version": DEEPSPEED_VERSION,
    }


def _zero3_optimizer(program: Program, groups: list[list[torch.nn.Parameter]], n: int) -> dict[str, Any]:
    """stage3.py ``_rigid_state_dict``: each parameter group split into sub-groups of ``sub_group_size``
    partition elements (``_create_fp16_sub_groups``), each a flat fp32 partition with the optimizer's state."""
    subs: list[tuple[list[torch.nn.Parameter], int]] = []
    for group in groups:
        current: list[torch.nn.Parameter] = []
        numel = 0
        for param in group:
            current.append(param)
            numel += ceil(param.numel() / n)
            if numel >= DEEPSPEED_SUB_GROUP_ELEMENTS or param is group[-1]:
                subs.append((current, numel))
                current, numel = [], 0
    state = {i: _inner_state(program, sub, numel) for i, (sub, numel) in enumerate(subs)}
    inner = {"state": state, "param_groups": _param_groups(program, len(subs))}
    return {
        "zero_stage": 3,
        "dynamic_loss_scale": False,
        "overflow": False,
        "partition_count": n,
        "optimizer_state_dict": inner,
        "fp32_flat_groups": [torch.empty(numel, device="meta") for _, numel in subs],
    }
