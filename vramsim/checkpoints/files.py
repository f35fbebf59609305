"""What a training checkpoint writes to disk, measured by the libraries' own save code on the traced state.

The Hugging Face Trainer's ``_save_checkpoint`` is followed call for call: ``save_pretrained`` (transformers,
or peft's for adapters) with only safetensors' final write replaced by one that writes the exact header and
leaves the tensor bytes as a hole, and ``torch.save`` of the optimizer, scheduler, scaler and RNG state
under ``torch.serialization.skip_data`` on FakeTensors of the target's device, which reserves each
storage's bytes without writing them. Every size is then read off the (sparse) files themselves.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from vramsim.estimators.assumptions import CUDA_RNG_STATE_BYTES, TRAINING_ARGS_BYTES
from vramsim.results.checkpoint import CheckpointFile
from vramsim.workload.program import Program

__all__ = [
    "SavedCheckpoint",
    "fake_on_device",
    "safetensors_header",
    "save_torch_checkpoint",
    "save_trainer_checkpoint",
]

SAFETENSORS_DTYPE_ORDER = (
    "BOOL",
    "F4",
    "F6_E2M3",
    "F6_E3M2",
    "U8",
    "I8",
    "F8_E5M2",
    "F8_E4M3",
    "F8_E8M0",
    "F8_E4M3FNUZ",
    "F8_E5M2FNUZ",
    "I16",
    "U16",
    "F16",
    "BF16",
    "I32",
    "U32",
    "F32",
    "C64",
    "F64",
    "I64",
    "U64",
)
"""safetensors' ``Dtype`` enum in declaration order (safetensors/src/tensor.rs, 0.8): the writer sorts
tensors by this order, descending, then by name, so the largest alignment comes first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedCheckpoint:
    """The files, and the sizes the save and restore paths hold at once."""

    files: list[CheckpointFile]
    shards: list[list[int]]
    """Each weights file's tensors' bytes: safetensors copies a whole file's device tensors to the host to
    save it, and the Trainer loads a whole file on the host to restore it."""
    optimizer_storages: list[int]
    """Bytes of each storage ``torch.save`` writes for the optimizer: each is copied to the host alone."""


def safetensors_header(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> bytes:
    """The header ``safetensors.torch.save_file`` writes: the little-endian length, then the JSON of every
    tensor's dtype, shape and offsets in the writer's order, padded with spaces to 8 bytes."""
    from safetensors.torch import _TYPES

    names = {dtype: name for name, dtype in _TYPES.items()}
    order = sorted(tensors, key=lambda key: (-SAFETENSORS_DTYPE_ORDER.index(names[tensors[key].dtype]), key))
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for key in order:
        tensor = tensors[key]
        size = tensor.numel() * tensor.element_size()
        header[key] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()  # serde_json writes UTF-8 as is
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def save_trainer_checkpoint(program: Program, *, device: str, gpus: int = 1) -> SavedCheckpoint:
    """The folder ``Trainer._save_checkpoint`` writes for ``program`` (traced, so its optimizer has state),
    with the device tensors standing for ``device`` (``cuda:0`` or ``cpu``)."""
    shards: list[list[int]] = []
    with tempfile.TemporaryDirectory() as folder, _quiet_progress():
        _save_model(program.model, folder, shards)
        storages = _save_states(program, Path(folder), device=device, gpus=gpus)
        files = [_describe(Path(folder) / name, optimizer_bytes=sum(storages), ranks=gpus) for name in sorted(os.listdir(folder))]
    files.append(CheckpointFile(name="training_args.bin", bytes=TRAINING_ARGS_BYTES, holds="TrainingArguments (pickled)"))
    return SavedCheckpoint(files=files, shards=shards, optimizer_storages=storages)


def save_torch_checkpoint(program: Program, *, device: str) -> SavedCheckpoint:
    """The plain loop's one file, ``torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
    "checkpoint.pt")``, with the device tensors standing for ``device``."""
    assert program.optimizer is not None, "a checkpoint is taken of a training program"
    model = program.model.state_dict()
    weights = list({t.untyped_storage()._cdata: t.untyped_storage().nbytes() for t in model.values()}.values())
    optimizer = program.optimizer.state_dict()
    storages = _storage_sizes(optimizer)
    with tempfile.TemporaryDirectory() as folder, torch.serialization.skip_data(materialize_fake_tensors=True):
        path = Path(folder) / "checkpoint.pt"
        torch.save(fake_on_device({"model": model, "optimizer": optimizer}, device), path)
        size = path.stat().st_size
    saved = CheckpointFile(
        name=path.name, bytes=size, holds="model and optimizer state (torch.save)", tensor_bytes=sum(weights) + sum(storages)
    )
    return SavedCheckpoint(files=[saved], shards=[weights], optimizer_storages=storages)


def _storage_sizes(optimizer_state: dict[str, Any]) -> list[int]:
    """Bytes of each tensor of an optimizer's state dict (each state tensor has its own storage)."""
    return [
        t.untyped_storage().nbytes()
        for one in optimizer_state["state"].values()
        for t in one.values()
        if isinstance(t, torch.Tensor)
    ]


def _save_model(model: torch.nn.Module, folder: str, shards: list[list[int]]) -> None:
    """``Trainer._save``: ``save_pretrained`` for a transformers or peft model, else the state dict alone."""
    save_pretrained = getattr(model, "save_pretrained", None)
    if callable(save_pretrained):
        with _hole_safetensors(shards):
            save_pretrained(folder)
        return
    _write_holed(model.state_dict(), os.path.join(folder, "model.safetensors"), {"format": "pt"}, shards)


def _save_states(program: Program, folder: Path, *, device: str, gpus: int) -> list[int]:
    """optimizer.pt, scheduler.pt, scaler.pt, rng_state.pth and trainer_state.json, as the Trainer writes them."""
    from transformers import get_scheduler
    from transformers.trainer_callback import TrainerState

    assert program.optimizer is not None, "a checkpoint is taken of a training program"
    saved = program.optimizer.state_dict()
    storages = _storage_sizes(saved)
    state = fake_on_device(saved, device)
    with torch.serialization.skip_data(materialize_fake_tensors=True):
        torch.save(state, folder / "optimizer.pt")
        if program.scaler is not None:  # its state is numbers read off the device (.item()); a fresh scaler's have its sizes
            torch.save(torch.amp.GradScaler("cpu").state_dict(), folder / "scaler.pt")
    scheduler = get_scheduler("linear", program.optimizer, num_warmup_steps=0, num_training_steps=1)
    torch.save(scheduler.state_dict(), folder / "scheduler.pt")
    rng: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}
    if device != "cpu":  # torch.cuda.get_rng_state(): one Philox state, or one per device in distributed runs
        one = torch.zeros(CUDA_RNG_STATE_BYTES, dtype=torch.uint8)
        rng["cuda"] = [one.clone() for _ in range(gpus)] if gpus > 1 else one
    torch.save(rng, folder / ("rng_state.pth" if gpus == 1 else "rng_state_0.pth"))
    TrainerState(global_step=1, max_steps=1).save_to_json(str(folder / "trainer_state.json"))
    return storages


def fake_on_device(state: Any, device: str) -> Any:
    """``state`` with its meta tensors as FakeTensors on ``device``, views of one fake storage per meta
    storage (tied weights stay one storage): what the save pickles, without the bytes."""
    mode = FakeTensorMode()
    storages: dict[int, torch.UntypedStorage] = {}

    def fake(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device.type != "meta":
            return tensor
        key = tensor.untyped_storage()._cdata
        with mode:
            if key not in storages:
                nbytes = tensor.untyped_storage().nbytes()
                storages[key] = torch.empty(nbytes, dtype=torch.uint8, device=device).untyped_storage()
            shell = torch.empty(0, dtype=tensor.dtype, device=device)
            return shell.set_(storages[key], tensor.storage_offset(), tensor.shape, tensor.stride())

    return _map_tensors(state, fake)


def _map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``obj`` with ``fn`` applied to its tensors; dicts are copied with their attributes (a state dict's
    ``_metadata``, which torch.save pickles too), which pytree's maps drop."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        mapped = copy.copy(obj)
        for key, value in obj.items():
            mapped[key] = _map_tensors(value, fn)
        return mapped
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(value, fn) for value in obj)
    return obj


def _write_holed(
    tensors: dict[str, torch.Tensor], filename: str, metadata: dict[str, str] | None, shards: list[list[int]]
) -> None:
    """A safetensors file of ``tensors``: the exact header, then a hole as long as their data."""
    header = safetensors_header(tensors, metadata)
    sizes = [t.numel() * t.element_size() for t in tensors.values()]
    with open(filename, "wb") as out:
        out.write(header)
        out.truncate(len(header) + sum(sizes))
    shards.append(sizes)


@contextlib.contextmanager
def _hole_safetensors(shards: list[list[int]]) -> Iterator[None]:
    """``safe_save_file`` as transformers and peft call it, writing holed files."""

    def save_file(tensors: dict[str, torch.Tensor], filename: str, metadata: dict[str, str] | None = None) -> None:
        _write_holed(tensors, filename, metadata, shards)

    with contextlib.ExitStack() as stack:
        for module in ("transformers.modeling_utils", "peft.peft_model"):
            with contextlib.suppress(ImportError):
                stack.enter_context(mock.patch(f"{module}.safe_save_file", save_file))
        yield


@contextlib.contextmanager
def _quiet_progress() -> Iterator[None]:
    """transformers' "Writing model shards" progress bar, which tells a vramsim user nothing."""
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()


_HOLDS = {
    "optimizer.pt": "optimizer state (torch.save)",
    "scheduler.pt": "LR scheduler",
    "scaler.pt": "fp16 GradScaler",
    "trainer_state.json": "Trainer state (step, log history)",
    "config.json": "model config",
    "generation_config.json": "generation config",
    "adapter_config.json": "adapter config",
    "README.md": "model card (peft)",
}


def _describe(path: Path, *, optimizer_bytes: int, ranks: int) -> CheckpointFile:
    size = path.stat().st_size
    name = path.name
    if name.endswith(".safetensors"):
        with open(path, "rb") as stored:
            (length,) = struct.unpack("<Q", stored.read(8))
        holds = "adapter weights (safetensors)" if name.startswith("adapter") else "model weights (safetensors)"
        return CheckpointFile(name=name, bytes=size, holds=holds, tensor_bytes=size - 8 - length)
    if name.startswith("rng_state"):
        return CheckpointFile(name=name, bytes=size, holds="RNG state (python, numpy, torch)", copies=ranks)
    if name.endswith(".index.json"):
        return CheckpointFile(name=name, bytes=size, holds="weight map of the shards")
    tensors = optimizer_bytes if name == "optimizer.pt" else 0
    return CheckpointFile(name=name, bytes=size, holds=_HOLDS.get(name, "other"), tensor_bytes=tensors)
