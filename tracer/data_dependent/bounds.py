"""Value bounds of integer index tensors whose values follow from shapes, and the lookups they overflow.

A meta tensor has no values, but some integer tensors' least and greatest values follow from shapes
alone: ``torch.arange(T)`` runs from 0 to ``T - 1`` (positions), a full tensor holds its fill value.
``Bounds`` keeps those two values per storage and follows them through the ops that keep them exact:
casts and copies, adding or subtracting a scalar (or a one-element tensor of known value),
concatenation and repetition; a view has them where it covers its whole storage (``unsqueeze``,
``expand``, ``view``), not where it may leave the extremes out (a slice). Any other write to a bounded
storage makes it unknown, and an unknown bound never raises. The values vramsim holds outright (the
synthesised token ids, small results: ``shadows.py``) give their extremes directly.

``check_lookup`` refuses an embedding, ``index_select``, ``gather`` or advanced-indexing lookup whose
indices certainly reach past the table, which on the device fails with "index out of range in self"
and on meta would trace as if it fitted (a custom model's learned position table at a sequence longer
than the table).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from vramsim.errors import TraceError

__all__ = ["Bound", "Bounds", "check_lookup"]

aten = torch.ops.aten


@dataclass(frozen=True, slots=True)
class Bound:
    """A storage's least and greatest value, both reached; ``source`` says what made them, for messages."""

    low: int
    high: int
    source: str

    def hull(self, other: Bound) -> Bound:
        return Bound(min(self.low, other.low), max(self.high, other.high), self.source)


Known = Callable[[torch.Tensor], Bound | None]
"""The bound of a meta tensor: from ``Bounds``, or the extremes of the values vramsim holds (shadows)."""


class Bounds:
    """Value bounds of integer meta storages, dropped when the storage dies."""

    def __init__(self) -> None:
        self._by_storage: dict[int, tuple[torch.dtype, Bound, Any]] = {}
        self._writes: dict[Any, tuple[int, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_storage)

    def get(self, tensor: torch.Tensor) -> Bound | None:
        """The storage's bound, where ``tensor`` reads all of the storage (so reaches both extremes)."""
        entry = self._by_storage.get(id(tensor.untyped_storage()))
        if entry is None or entry[0] != tensor.dtype or not _covers(tensor):
            return None
        return entry[1]

    def set(self, tensor: torch.Tensor, value: Bound) -> None:
        if not _integral(tensor):
            return
        storage = tensor.untyped_storage()
        key = id(storage)
        ref = weakref.ref(storage, functools.partial(_forget, self._by_storage, key))
        self._by_storage[key] = (tensor.dtype, value, ref)

    def clear(self) -> None:
        self._by_storage.clear()

    def follow(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, known: Known) -> None:
        """After ``func`` ran: the bound its output has (``known`` reads its inputs'); written storages lose theirs."""
        made = _made(func, args, kwargs, out, known) if isinstance(out, torch.Tensor) and _integral(out) else None
        if self:
            for tensor in self._written(func, args, kwargs):
                if made is not None and tensor.untyped_storage() is out.untyped_storage() and not _covers(tensor):
                    made = None  # an in-place op on part of the storage: the rest keeps values it does not follow
                self._by_storage.pop(id(tensor.untyped_storage()), None)
        if made is not None:
            self.set(out, made)

    def _written(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        positions = self._writes.get(func)
        if positions is None:
            schema = getattr(func, "_schema", None)
            arguments = schema.arguments if schema is not None else []
            positions = self._writes[func] = tuple(
                i for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write
            )
        written = []
        for i in positions:
            name = func._schema.arguments[i].name
            target = args[i] if i < len(args) else kwargs.get(name)
            for tensor in target if isinstance(target, (list, tuple)) else [target]:
                if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
                    written.append(tensor)
        return written


def _forget(by_storage: dict[int, Any], key: int, _dead: Any) -> None:
    by_storage.pop(key, None)


def _covers(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` reads every element of its storage: from its start, with as many distinct
    elements (its sizes over dims of nonzero stride) as the storage holds."""
    distinct = 1
    for size, stride in zip(tensor.shape, tensor.stride(), strict=True):
        distinct *= size if stride else 1
    return tensor.storage_offset() == 0 and distinct * tensor.element_size() == tensor.untyped_storage().nbytes()


def _integral(tensor: torch.Tensor) -> bool:
    return (
        tensor.device.type == "meta"
        and not tensor.is_floating_point()
        and not tensor.is_complex()
        and tensor.dtype is not torch.bool
    )


_ARANGE = {aten.arange.default, aten.arange.start, aten.arange.start_step}
_FILLS = {aten.full.default: 1, aten.full_like.default: 1, aten.scalar_tensor.default: 0}
_CONSTANTS = {aten.zeros.default: 0, aten.zeros_like.default: 0, aten.ones.default: 1, aten.ones_like.default: 1}
_COPIES = {aten._to_copy.default, aten.clone.default, aten.lift_fresh_copy.default, aten.repeat.default, aten.alias.default}
_ADDS = {aten.add.Tensor: 1, aten.add.Scalar: 1, aten.add_.Tensor: 1, aten.add_.Scalar: 1}
_SUBS = {aten.sub.Tensor: -1, aten.sub.Scalar: -1, aten.sub_.Tensor: -1, aten.sub_.Scalar: -1}
_JOINS = {aten.cat.default, aten.stack.default}


def _made(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: torch.Tensor, known: Known) -> Bound | None:
    """The bound of ``out`` that ``func`` of bounded inputs gives, where it follows exactly; else None."""
    if func in _ARANGE:
        start, step = (0, 1) if func is aten.arange.default else (args[0], args[2] if len(args) > 2 else kwargs.get("step", 1))
        if out.numel() == 0 or not all(isinstance(v, int) for v in (start, step)):
            return None
        last = start + step * (out.numel() - 1)
        return Bound(min(start, last), max(start, last), "torch.arange")
    if func in _FILLS:
        value = args[_FILLS[func]]
        return Bound(value, value, "a full tensor") if isinstance(value, int) and not isinstance(value, bool) else None
    if func in _CONSTANTS:
        return Bound(_CONSTANTS[func], _CONSTANTS[func], "a full tensor")
    if func in _COPIES:
        copied = _of(args[0], known)
        limits = torch.iinfo(out.dtype)
        return copied if copied is not None and limits.min <= copied.low and copied.high <= limits.max else None
    if func in _ADDS or func in _SUBS:
        sign = _ADDS.get(func) or _SUBS[func]
        alpha = kwargs.get("alpha", 1)
        shift = args[1] if not isinstance(args[1], torch.Tensor) or args[1].numel() == 1 else None
        first, second = _of(args[0], known), _of(shift, known)
        if first is None or second is None or not isinstance(alpha, int):
            return None  # two tensors' extremes need not meet in one element: their sum's are unknown
        offset = sign * alpha * second.high
        return Bound(first.low + offset, first.high + offset, first.source)
    if func in _JOINS:
        parts = [_of(t, known) for t in args[0]]
        if not parts or any(p is None for p in parts):
            return None
        return functools.reduce(Bound.hull, parts)  # type: ignore[arg-type]
    return None


def _of(value: Any, known: Known) -> Bound | None:
    """The bound of an operand: an int is its own; a meta tensor's is what ``known`` says."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Bound(value, value, "a scalar")
    if isinstance(value, torch.Tensor) and _integral(value):
        return known(value)
    return None


_LOOKUPS = {aten.embedding.default, aten.index_select.default, aten.gather.default, aten.index.Tensor}


def check_lookup(func: Any, args: tuple[Any, ...], known: Known, module: str) -> None:
    """Raise ``TraceError`` when a lookup's indices certainly reach past its table (see the module docstring)."""
    if func not in _LOOKUPS:
        return
    for rows, indices, what in _lookups(func, args):
        if not isinstance(indices, torch.Tensor) or indices.numel() == 0 or not _integral(indices):
            continue
        reach = known(indices)
        if reach is not None and reach.high >= rows:
            shape = "x".join(map(str, indices.shape))
            raise TraceError(
                f"{module or 'the model'}: {what} has {rows:,} rows but its indices ({reach.source}, shape {shape}) reach "
                f"{reach.high:,}; the real run fails with 'index out of range in self'"
            )


def _lookups(func: Any, args: tuple[Any, ...]) -> list[tuple[int, Any, str]]:
    """(rows, indices, what is indexed) of each table the lookup reads."""
    if func is aten.embedding.default:
        return [(args[0].shape[0], args[1], "nn.Embedding")]
    if func is aten.index.Tensor:
        table, found, dim = args[0], [], 0
        for index in args[1]:
            if index is not None and index.dtype not in (torch.bool, torch.uint8) and dim < table.dim():
                found.append((table.shape[dim], index, "the indexed tensor"))
            masked = index is not None and index.dtype in (torch.bool, torch.uint8)
            dim += index.dim() if masked else 1  # a mask indexes as many dims as it has
        return found
    table, dim, index = args[0], args[1], args[2]
    if table.dim() == 0:
        return []
    return [(table.shape[dim], index, f"{func.overloadpacket.__name__}'s input")]
