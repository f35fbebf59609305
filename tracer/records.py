"""What the tracer records: one row per storage and per op, on a single event clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from itertools import chain
from operator import attrgetter
from typing import Any

from .categories import Category, Phase
from .collector import collector_paused

__all__ = ["HoldRecord", "OpRecord", "StorageRecord", "Trace", "UnitRecord"]

BEFORE_TRACE = 0
"""Event clock of storages that already existed when tracing began (weights, buffers)."""


@dataclass(slots=True, kw_only=True)
class StorageRecord:
    """One storage: the unit the allocator hands out, shared by all views of it."""

    sid: int
    """Index of this storage in ``Trace.storages``."""
    nbytes: int
    shape: tuple[int, ...]
    """Shape of the first tensor seen on this storage."""
    dtype: str
    device: str
    """The device the program put it on (``meta`` stands for the simulated target)."""
    op: str
    """The aten op that allocated it, or ``"<pre-existing>"``."""
    module: str
    """Innermost module active at allocation ("" outside any module)."""
    phase: Phase
    step: int
    """Training/inference step index (0-based), -1 before the first step."""
    alloc_clock: int
    free_clock: int | None = None
    """Clock of the free event; ``None`` while still live at the end of the trace."""
    category: Category = Category.TEMPORARY
    owner: str = ""
    """For gradients and optimizer states: the parameter they belong to."""
    unreferenced_clock: int | None = None
    """Clock at which the program first held no tensor of this storage: autograd's saved
    copies aside, it would have been freed then. ``None`` if never seen unreferenced."""


@dataclass(slots=True, kw_only=True)
class OpRecord:
    """One aten op as the dispatcher ran it."""

    index: int
    name: str
    module: str
    phase: Phase
    step: int
    inputs: tuple[int, ...]
    """Storage ids the op read (views resolved to their storage)."""
    outputs: tuple[int, ...]
    """Storage ids the op allocated."""
    clock_after: int
    """Event clock right after the op's own allocations."""
    flops: int = 0
    """Floating-point operations of the op (``torch.utils.flop_counter``'s formulas; 0 where it has none)."""


@dataclass(slots=True, kw_only=True)
class HoldRecord:
    """One tensor autograd saved for backward (one ``SavedVariable``): what keeps an activation alive."""

    sid: int
    """The storage it keeps alive."""
    op: int
    """Ops recorded before it was saved. An op's autograd node saves the op's inputs before the op
    runs and its outputs after, so the saving op is ``op - 1`` (an output) or ``op`` (an input)."""
    unit: int | None
    """Index in ``Trace.units`` of the checkpointable block that was running, if any."""
    nbytes: int
    """Bytes of the saved tensor itself (numel x element size), what a copy of it would take."""
    pack_clock: int
    unpack_clock: int | None = None
    """Clock at which backward first read it back; ``None`` if it never did."""
    release_clock: int | None = None
    """Clock at which autograd let go of it; ``None`` if still held at the end."""


@dataclass(slots=True, kw_only=True)
class UnitRecord:
    """One call of a block the model can checkpoint (a decoder layer, a UNet resnet), as the
    model's own checkpointing call site ran it."""

    module: str
    step: int
    index: int
    """The block's number: blocks are numbered in the order they first ran (decoder layer i is i)."""
    first_clock: int
    """Clock when the call began (its allocations come after)."""
    last_clock: int
    """Clock when the call returned."""
    first_op: int
    """Index of the first op run inside the call."""
    last_op: int
    """Index of the last op run inside the call (``first_op - 1`` if none ran)."""
    inputs: tuple[int, ...]
    """Storages of the tensors passed to the call (what a checkpoint keeps for its recompute)."""
    saved_inputs: tuple[int, ...] = ()
    """Those passed positionally: what a non-reentrant checkpoint saves through the saved-tensor hooks in force
    (``_CheckpointFrame.save_inputs`` in torch 2.13); transformers passes a layer's keyword arguments in a
    ``partial``, which no hook sees."""


@dataclass(slots=True, kw_only=True)
class Trace:
    """Everything one traced run produced, with no tensors held."""

    storages: list[StorageRecord] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    events: list[tuple[int, bool]] = field(default_factory=list)
    """The timeline: ``(sid, is_alloc)`` per event; event ``i`` has clock ``i + 1``."""
    step_clocks: list[tuple[int, int]] = field(default_factory=list)
    """``(first_clock, last_clock)`` of each step, in order."""
    holds: list[HoldRecord] = field(default_factory=list)
    units: list[UnitRecord] = field(default_factory=list)
    decode_clocks: list[int] = field(default_factory=list)
    """Events recorded when the generate loop marked its cache: where each decode step began, and
    (the last mark of a step) where the loop ended."""
    nested_units: bool = False
    """Whether a checkpointable block ran inside another (only the outer ones are in ``units``)."""
    head_module: str | None = None
    """The module path of the model's output head (``get_output_embeddings``), where it has one."""
    managed: tuple[int, ...] = ()
    """Storages a real run keeps in CUDA managed memory, outside PyTorch's caching allocator (bitsandbytes'
    paged optimizer states)."""
    notes: list[str] = field(default_factory=list)
    """Assumptions the run made (data-dependent values, emulated kernels)."""

    def __reduce__(self) -> tuple[Callable[..., Trace], tuple[Any, ...]]:
        """Pickled by columns (a sweep's worker sends a trace of 100,000 records back): each record field one tuple,
        a field of tuples (shapes, an op's storages) their lengths and their values end to end, the records
        rebuilt from them (``_rebuilt``): the unpickler makes a few objects, not one per record and tuple."""
        state: dict[str, Any] = {}
        with collector_paused():
            for spec in fields(self):
                value = getattr(self, spec.name)
                kind = _RECORD_LISTS.get(spec.name)
                if kind is not None:
                    names = _NAMES[kind]
                    columns = zip(*map(_READERS[kind], value), strict=True) if value else [()] * len(names)
                    state[spec.name] = {name: _packed(column) for name, column in zip(names, columns, strict=True)}
                elif spec.name == "events":
                    state[spec.name] = tuple(zip(*value, strict=True))
                else:
                    state[spec.name] = value
        return _rebuilt, (state,)


_RECORD_LISTS: dict[str, type] = {"storages": StorageRecord, "ops": OpRecord, "holds": HoldRecord, "units": UnitRecord}
"""The ``Trace`` fields that list records, with the records' type."""

_NAMES: dict[type, tuple[str, ...]] = {kind: tuple(spec.name for spec in fields(kind)) for kind in _RECORD_LISTS.values()}

_READERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {kind: attrgetter(*names) for kind, names in _NAMES.items()}
"""Each record type's fields in one call (every record type has several: ``attrgetter`` gives a tuple)."""


@dataclass(frozen=True, slots=True)
class _Tuples:
    """A column of tuples, packed: each one's length, and their values end to end."""

    lengths: tuple[int, ...]
    values: tuple[Any, ...]

    def unpacked(self) -> list[tuple[Any, ...]]:
        flat, start, column = self.values, 0, []
        for length in self.lengths:
            column.append(flat[start : start + length])
            start += length
        return column


def _packed(column: tuple[Any, ...]) -> tuple[Any, ...] | _Tuples:
    if all(type(value) is tuple for value in column):
        return _Tuples(tuple(map(len, column)), tuple(chain.from_iterable(column)))
    return column


def _rebuilt(state: dict[str, Any]) -> Trace:
    """A ``Trace`` from ``Trace.__reduce__``'s columns."""
    with collector_paused():
        values = dict(state)
        for name, kind in _RECORD_LISTS.items():
            columns = [c.unpacked() if isinstance(c, _Tuples) else c for c in state[name].values()]
            names = tuple(state[name])
            values[name] = [kind(**dict(zip(names, row, strict=True))) for row in zip(*columns, strict=True)]
        values["events"] = list(zip(*state["events"], strict=True))
        return Trace(**values)
