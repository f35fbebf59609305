"""CPU values of meta storages: what vramsim knows about a meta tensor's contents."""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["NOTE_INPUTS", "SEEDS", "SHADOW_LIMIT", "Shadows", "forget_seeds", "seed"]

SHADOW_LIMIT = 1 << 20
"""Largest output (elements) an op is run for on value shadows; larger results stay unknown."""
NOTE_INPUTS = (
    "the synthesised inputs' values are used where the program reads them: token ids drawn at random (seed 0) "
    "outside special tokens, masks all ones"
)


@dataclass(slots=True)
class _Shadow:
    flat: torch.Tensor
    """The storage's values as one flat CPU tensor of its dtype."""
    origins: frozenset[str]
    """Notes of the assumptions these values rest on."""
    ref: Any = None


class Shadows:
    """CPU values of meta storages, dropped when the storage dies."""

    def __init__(self) -> None:
        self._by_storage: dict[int, _Shadow] = {}

    def __bool__(self) -> bool:
        return bool(self._by_storage)

    def get(self, tensor: torch.Tensor) -> tuple[torch.Tensor, frozenset[str]] | None:
        entry = self._by_storage.get(id(tensor.untyped_storage()))
        if entry is None or entry.flat.dtype != tensor.dtype:
            return None
        try:
            view = entry.flat.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())
        except RuntimeError:
            return None
        return view, entry.origins

    def has(self, tensor: torch.Tensor) -> bool:
        return id(tensor.untyped_storage()) in self._by_storage

    def set(self, tensor: torch.Tensor, values: torch.Tensor, origins: frozenset[str]) -> None:
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self._by_storage or tensor.dtype.itemsize == 0:
            return
        flat = torch.zeros(storage.nbytes() // tensor.dtype.itemsize, dtype=tensor.dtype, device="cpu")
        try:
            flat.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset()).copy_(values)
        except RuntimeError:
            return
        entry = _Shadow(flat, origins)
        entry.ref = weakref.ref(storage, functools.partial(_forget, self._by_storage, key))
        self._by_storage[key] = entry

    def drop(self, tensor: torch.Tensor) -> None:
        self._by_storage.pop(id(tensor.untyped_storage()), None)

    def clear(self) -> None:
        self._by_storage.clear()


def _forget(by_storage: dict[int, _Shadow], key: int, _dead: Any) -> None:
    """A shadowed storage died: its values go with it (a new storage may reuse its id)."""
    by_storage.pop(key, None)


SEEDS = Shadows()
"""Values of inputs made before tracing began (``seed``), shared by every policy until
``forget_seeds``: inputs are synthesised before the tracer that reads them exists."""


def seed(values: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``values`` on ``device``; on meta, remember them so the traced program can read them."""
    out = values.to(device)
    if out.device.type == "meta" and values.numel() <= SHADOW_LIMIT:
        SEEDS.set(out, values.detach().cpu(), frozenset({NOTE_INPUTS}))
    return out


def forget_seeds() -> None:
    """Drop every seeded value: called when a trace ends, so none outlives its simulation."""
    SEEDS.clear()
