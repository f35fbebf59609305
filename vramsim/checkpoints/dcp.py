"""What ``torch.distributed.checkpoint.save`` writes on each rank, from the traced state and DCP's own planner.

The state saved is what torchtitan and accelerate save: ``get_state_dict(model, optimizer)`` (torch's
``state_dict.py``: the model's state dict and the optimizer's keyed by parameter name), as
``{"model": ..., "optim": ...}``. Under FSDP2 every parameter and every optimizer state shaped like it is a
DTensor sharded on dim 0 over the ranks; the rest (buffers, ``step`` counters, hyperparameters) is the same on
every rank. Each rank's plan has one write item per value, made with DCP's classes: a tensor's chunk is the
rank's rows (``_compute_local_shape_and_global_offset``, as ``_create_write_items_for_dtensor`` computes it), a
non-tensor a ``BYTE_IO`` item. DCP's own ``dedup_save_plans`` keeps each replicated item on one rank (the least
loaded), ``create_default_global_save_plan`` builds the metadata, and ``FileSystemWriter`` (one thread, one file
per rank) writes ``__{rank}_0.distcp``: the byte items' ``torch.save`` pickles, then every tensor as its own
``torch.save`` of the rank's chunk (``filesystem.py`` ``_write_item``), in the order the writer's loader hands
them over (sorted by size on a GPU, ``_OverlappingCpuLoader``). Each ``torch.save`` here is torch's own, of a
FakeTensor under ``skip_data``; ``.metadata`` is the pickle ``FileSystemWriter.finish`` writes.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
from collections import ChainMap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed.checkpoint._dedup_save_plans import dedup_save_plans
from torch.distributed.checkpoint._nested_dict import flatten_state_dict
from torch.distributed.checkpoint.default_planner import create_default_global_save_plan
from torch.distributed.checkpoint.filesystem import CURRENT_DCP_VERSION, _generate_uuid, _StorageInfo
from torch.distributed.checkpoint.metadata import (
    ChunkStorageMetadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
)
from torch.distributed.checkpoint.planner import SavePlan, TensorWriteData, WriteItem, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.distributed.tensor import Shard
from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

from vramsim.estimators.assumptions import DCP_CHECKPOINT_PATH, DCP_COPY_AHEAD_BYTES
from vramsim.workload.program import Program

__all__ = ["DcpRank", "dcp_save"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DcpRank:
    """One rank's part of a DCP checkpoint."""

    rank: int
    file_bytes: int
    """``__{rank}_0.distcp``."""
    tensor_bytes: int
    """The tensor data in it (the rest is each ``torch.save``'s zip records and the byte items)."""
    staged_bytes: int
    """What ``async_save`` stages in host memory: every tensor of the rank's state dict (its own chunks)."""
    copy_ahead_bytes: int
    """The most a synchronous save from a GPU holds on the host at once (the writer's copy-ahead window)."""
    loaded: list[int]
    """Bytes of each tensor a restore on this rank reads, in ``dcp.load``'s order (its state dict's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Value:
    """One flattened value of a rank's state dict: a tensor's global shape and dtype, or a pickled object."""

    shape: torch.Size | None
    dtype: torch.dtype | None
    sharded: bool
    obj: Any = None


def dcp_save(program: Program, *, gpus: int, sharded: bool, on_gpu: bool) -> tuple[list[DcpRank], int]:
    """Each rank's file and the ``.metadata`` file's bytes. ``sharded``: FSDP2 (DTensors on dim 0); else
    DDP, every value the same on each rank."""
    values, mappings = _flat_state(program, sharded)
    plans = [
        SavePlan([_item(key, value, rank, gpus) for key, value in values.items()], planner_data=mappings) for rank in range(gpus)
    ]
    loaded = [[_local_bytes(item) for item in plan.items if item.type != WriteItemType.BYTE_IO] for plan in plans]
    # Each rank's plan reaches the coordinator pickled (gather_object), and so do its write results: the
    # metadata holds copies, which pickle shares less than one object graph would.
    plans, metadata = create_default_global_save_plan(dedup_save_plans([_copied(plan) for plan in plans]))
    metadata = dataclasses.replace(metadata, planner_data=dict(ChainMap(*(p.planner_data for p in plans))))
    ranks, storage = [], {}
    for rank, plan in enumerate(plans):
        results = []
        name = f"__{rank}_0.distcp"
        offset = tensor_bytes = staged = 0
        byte_items = [item for item in plan.items if item.type == WriteItemType.BYTE_IO]
        tensor_items = [item for item in plan.items if item.type != WriteItemType.BYTE_IO]
        if on_gpu:  # _OverlappingCpuLoader sorts by the item's global size (a stable sort)
            tensor_items.sort(key=_global_bytes)
        sizes = []
        for item in byte_items + tensor_items:
            if item.type == WriteItemType.BYTE_IO:
                length = _pickled_bytes(values[item.index.fqn].obj)
            else:
                chunk, dtype = item.tensor_data.chunk.sizes, item.tensor_data.properties.dtype  # type: ignore[union-attr]
                length = _saved_tensor_bytes(tuple(chunk), dtype)
                sizes.append(_local_bytes(item))
            info = _StorageInfo(relative_path=name, offset=offset, length=length)
            results.append(WriteResult(index=item.index, size_in_bytes=length, storage_data=info))
            offset += length
        storage.update({result.index: result.storage_data for result in _copied(results)})
        tensor_bytes = staged = sum(sizes)
        ranks.append(
            DcpRank(
                rank=rank,
                file_bytes=offset,
                tensor_bytes=tensor_bytes,
                staged_bytes=staged,
                copy_ahead_bytes=_copy_ahead(sizes) if on_gpu else 0,
                loaded=loaded[rank],
            )
        )
    metadata.storage_data = storage
    metadata.storage_meta = StorageMeta(checkpoint_id=Path(DCP_CHECKPOINT_PATH), save_id=_generate_uuid())
    metadata.version = CURRENT_DCP_VERSION
    return ranks, len(pickle.dumps(metadata))


def _copied(obj: Any) -> Any:
    """``obj`` as another rank receives it from an object collective."""
    return pickle.loads(pickle.dumps(obj))


def _flat_state(program: Program, sharded: bool) -> tuple[dict[str, _Value], Any]:
    """``{"model": get_model_state_dict, "optim": get_optimizer_state_dict}`` flattened as DCP flattens it."""
    assert program.optimizer is not None, "a checkpoint is taken of a training program"
    model = program.model
    names = {id(p): name for name, p in model.named_parameters()}
    saved = program.optimizer.state_dict()
    order = [p for group in program.optimizer.param_groups for p in group["params"]]
    by_index = {index: names[id(p)] for index, p in enumerate(order)}
    optim: dict[str, Any] = {
        "state": {by_index[i]: dict(state) for i, state in saved["state"].items()},
        "param_groups": [{**group, "params": [by_index[i] for i in group["params"]]} for group in saved["param_groups"]],
    }
    state = {"model": model.state_dict(), "optim": optim}
    flat, mappings = flatten_state_dict(state)
    shapes = {name: p.shape for name, p in model.named_parameters(remove_duplicate=False)}
    values = {}
    for key, value in flat.items():
        if not isinstance(value, torch.Tensor):
            values[key] = _Value(shape=None, dtype=None, sharded=False, obj=value)
            continue
        path = mappings[key]
        owner = path[2] if path[0] == "optim" else path[1]
        is_param = owner in shapes and (path[0] == "model" or value.shape == shapes[owner])
        values[key] = _Value(shape=value.shape, dtype=value.dtype, sharded=sharded and is_param and value.dim() > 0)
    return values, mappings


def _item(key: str, value: _Value, rank: int, gpus: int) -> WriteItem:
    """DCP's write item for ``value`` on ``rank``: a DTensor's chunk, a whole tensor, or bytes."""
    if value.shape is None:
        return WriteItem(index=MetadataIndex(key), type=WriteItemType.BYTE_IO)
    assert value.dtype is not None
    if value.sharded:
        sizes, offsets = _compute_local_shape_and_global_offset(value.shape, (gpus,), [rank], [Shard(0)])
        kind = WriteItemType.SHARD
    else:
        sizes, offsets = tuple(value.shape), (0,) * len(value.shape)
        kind = WriteItemType.TENSOR
    chunk = ChunkStorageMetadata(offsets=torch.Size(offsets), sizes=torch.Size(sizes))
    data = TensorWriteData(chunk=chunk, properties=TensorProperties(dtype=value.dtype), size=value.shape)
    return WriteItem(index=MetadataIndex(key, torch.Size(offsets)), type=kind, tensor_data=data)


def _local_bytes(item: WriteItem) -> int:
    """The rank's chunk of a tensor item, in bytes."""
    data = item.tensor_data
    assert data is not None
    return data.chunk.sizes.numel() * torch._utils._element_size(data.properties.dtype)


def _global_bytes(item: WriteItem) -> int:
    """``filesystem._item_size``: the key the GPU loader sorts by, the tensor's global size in bytes."""
    data = item.tensor_data
    assert data is not None
    return data.size.numel() * torch._utils._element_size(data.properties.dtype)


_SAVED: dict[tuple[tuple[int, ...], torch.dtype], int] = {}


def _saved_tensor_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Bytes of ``torch.save`` of a contiguous CPU tensor into a stream, as ``_write_item`` writes each one."""
    key = (shape, dtype)
    if key not in _SAVED:
        with FakeTensorMode():
            tensor = torch.empty(shape, dtype=dtype)
        out = io.BytesIO()
        with torch.serialization.skip_data(materialize_fake_tensors=True):
            torch.save(tensor, out)
        _SAVED[key] = len(out.getvalue())
    return _SAVED[key]


def _pickled_bytes(obj: Any) -> int:
    """A byte item: the planner's ``transform_object`` writes ``torch.save(obj)`` into a buffer."""
    out = io.BytesIO()
    torch.save(obj, out)
    return len(out.getvalue())


def _copy_ahead(sizes: list[int]) -> int:
    """The most host memory ``_OverlappingCpuLoader`` holds: it copies tensors (smallest first) until
    ``per_thread_copy_ahead`` bytes are in flight, then hands over the oldest while that many are."""
    pending = sorted(sizes)
    in_flight: list[int] = []
    peak = 0
    while pending or in_flight:
        while pending and sum(in_flight) < DCP_COPY_AHEAD_BYTES:
            in_flight.append(pending.pop(0))
        peak = max(peak, sum(in_flight))
        if not pending:
            break
        while in_flight and sum(in_flight) >= DCP_COPY_AHEAD_BYTES:
            in_flight.pop(0)
    return peak
