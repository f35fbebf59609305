"""The dispatch-level tracer: every storage allocated and freed, with its op, module and phase."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .categories import Category, Phase
from .records import BEFORE_TRACE, OpRecord, StorageRecord, Trace
from .scope import ModuleScope

__all__ = ["MemoryTracer"]

_PRIORITY = {
    category: rank
    for rank, category in enumerate(
        [
            Category.TEMPORARY,
            Category.OUTPUT,
            Category.ACTIVATION,
            Category.INPUT,
            Category.KV_CACHE,
            Category.OPTIMIZER_STATE,
            Category.GRADIENT,
            Category.BUFFER,
            Category.PARAMETER,
        ]
    )
}
"""When one storage plays several roles, the longest-lived role names it."""


class MemoryTracer(TorchDispatchMode):
    """Records the allocation and free of every storage a program makes, holding no memory.

    Allocations are seen in ``__torch_dispatch__`` as op outputs whose storage is new; views and
    in-place ops return a known storage and allocate nothing. Frees come from a weakref on the
    storage's Python object, which PyTorch keeps alive exactly as long as the C++ storage.
    Categories are settled by facts the workload reports (``mark``) and by autograd's
    saved-tensor hook, which names activations.

    Example usage::

        scope = ModuleScope(model)
        with scope, MemoryTracer(scope, devices={"meta"}) as tracer:
            tracer.register_module(model)
            model(x).sum().backward()
        trace = tracer.trace

    Known limitations:
        - Memory a kernel allocates internally (workspaces) is invisible at dispatch level; the
          target's emulation rules add it where a kernel's source says it exists.
        - ``resize_`` of an existing storage is not tracked.
        - Tensor subclasses that own no storage of their own are skipped.
    """

    def __init__(self, scope: ModuleScope, *, devices: Iterable[str]) -> None:
        super().__init__()
        self.scope = scope
        self.trace = Trace()
        self._devices = frozenset(devices)
        self._sids: dict[int, int] = {}
        """``id(UntypedStorage)`` of each live storage -> its sid."""
        self._refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self._saved_hooks = saved_tensors_hooks(self._pack, _unpack)

    def __enter__(self) -> MemoryTracer:
        self._saved_hooks.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._saved_hooks.__exit__(*exc)
            self._refs.clear()  # frees after the trace ended are not part of it

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        flat_in, _ = tree_flatten((args, kwargs))
        inputs = tuple(self._sid_of(t) for t in flat_in if self._counts(t))
        out = func(*args, **kwargs)
        flat_out, _ = tree_flatten(out)
        created = tuple(self._track(t, str(func.overloadpacket)) for t in flat_out if self._counts(t))
        new = tuple(sid for sid, is_new in created if is_new)
        self.trace.ops.append(
            OpRecord(
                index=len(self.trace.ops),
                name=str(func.overloadpacket),
                module=self.scope.module,
                phase=self.scope.current_phase,
                step=self.scope.step,
                inputs=tuple(sid for sid in inputs if sid is not None),
                outputs=new,
                clock_after=len(self.trace.events),
            )
        )
        return out

    # -- facts reported by the workload -------------------------------------------------------

    def register_module(self, module: torch.nn.Module) -> None:
        """Account the weights and buffers that existed before tracing began."""
        for param in module.parameters():
            self.mark(param, Category.PARAMETER)
        for buffer in module.buffers():
            self.mark(buffer, Category.BUFFER)

    def mark(self, tensor: torch.Tensor, category: Category) -> None:
        """Record that ``tensor``'s storage plays ``category``; the longest-lived role wins."""
        if not self._counts(tensor):
            return
        sid = self._sid_of(tensor)
        if sid is None:
            sid, _ = self._track(tensor, "<pre-existing>", clock=BEFORE_TRACE)
        record = self.trace.storages[sid]
        if _PRIORITY[category] > _PRIORITY[record.category]:
            record.category = category

    def mark_all(self, tensors: Iterable[Any], category: Category) -> None:
        """``mark`` every tensor found in a nested structure."""
        for item in tensors:
            if isinstance(item, torch.Tensor):
                self.mark(item, category)

    def begin_step(self, step: int) -> None:
        self.scope.step = step
        self.trace.step_clocks.append((len(self.trace.events) + 1, len(self.trace.events)))

    def end_step(self) -> None:
        first, _ = self.trace.step_clocks[-1]
        self.trace.step_clocks[-1] = (first, len(self.trace.events))

    # -- internals ----------------------------------------------------------------------------

    def _counts(self, obj: Any) -> bool:
        return (
            isinstance(obj, torch.Tensor)
            and obj.device.type in self._devices
            and obj.layout is torch.strided
            and not _is_wrapper_subclass(obj)
        )

    def _sid_of(self, tensor: torch.Tensor) -> int | None:
        return self._sids.get(id(tensor.untyped_storage()))

    def _track(self, tensor: torch.Tensor, op: str, clock: int | None = None) -> tuple[int, bool]:
        """Return the storage's sid and whether this call allocated it."""
        storage = tensor.untyped_storage()
        key = id(storage)
        sid = self._sids.get(key)
        if sid is not None:
            return sid, False
        sid = len(self.trace.storages)
        if clock is None:
            self.trace.events.append((sid, True))
            clock = len(self.trace.events)
        self.trace.storages.append(
            StorageRecord(
                sid=sid,
                nbytes=storage.nbytes(),
                shape=tuple(tensor.shape),
                dtype=str(tensor.dtype).removeprefix("torch."),
                device=tensor.device.type,
                op=op,
                module=self.scope.module,
                phase=self.scope.current_phase,
                step=self.scope.step,
                alloc_clock=clock,
            )
        )
        self._sids[key] = sid
        self._refs[key] = weakref.ref(storage, lambda _, key=key, sid=sid: self._free(key, sid))
        return sid, True

    def _free(self, key: int, sid: int) -> None:
        self.trace.events.append((sid, False))
        self.trace.storages[sid].free_clock = len(self.trace.events)
        del self._sids[key]
        del self._refs[key]

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.scope.phase in (Phase.FORWARD, Phase.BACKWARD):
            self.mark(tensor, Category.ACTIVATION)
        return tensor


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _is_wrapper_subclass(tensor: torch.Tensor) -> bool:
    """Subclasses such as DTensor wrap inner tensors; the inner ones carry the memory."""
    return type(tensor) not in (torch.Tensor, torch.nn.Parameter) and hasattr(tensor, "__tensor_flatten__")
