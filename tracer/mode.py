"""The dispatch-level tracer: every storage allocated and freed, with its op, module and phase."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from .categories import Category, Phase
from .collector import collector_paused
from .data_dependent import DataDependentPolicy
from .leaves import attached_tensors, is_wrapper_subclass, is_wrapper_type, tensor_leaves
from .native_meta import native_meta_kernels
from .patches import dispatched_rng_state, host_checkpoint_device
from .records import BEFORE_TRACE, HoldRecord, OpRecord, StorageRecord, Trace, UnitRecord
from .scope import ModuleScope

__all__ = ["MemoryTracer", "WorkspaceRule"]

WorkspaceRule = Callable[[Any, tuple[Any, ...], dict[str, Any]], list[int]]
"""``(op, args, kwargs) -> [bytes, ...]``: buffers a target's kernel allocates and frees inside the op."""

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

        scope = ModuleScope({"": model})
        with scope, MemoryTracer(scope, devices={"meta"}) as tracer:
            tracer.register_module(model)
            model(x).sum().backward()
        trace = tracer.trace

    Known limitations:
        - Memory a kernel allocates internally (workspaces) is invisible at dispatch level; the
          target's emulation rules add it where a kernel's source says it exists.
        - ``resize_`` of an existing storage is not tracked.
        - Tensor subclasses that own no storage of their own are skipped. An op on one is handed to the
          subclass (``NotImplemented``), as FakeTensorMode hands on types it does not know: the ops its
          ``__torch_dispatch__`` runs on the inner tensors then come back through this mode and are
          recorded (torchao's ``Float8TrainingTensor`` copies its operands and calls ``_scaled_mm`` there).
    """

    def __init__(
        self,
        scope: ModuleScope,
        *,
        devices: Iterable[str],
        workspaces: WorkspaceRule | None = None,
        moe_routing: str = "balanced",
        compiled: bool = False,
    ) -> None:
        super().__init__()
        self._compiled = compiled
        """Whether ``torch.compile``d code runs its compiled graphs under the tracer (see ``ignore_compile_internals``)."""
        self._workspaces = workspaces
        self.scope = scope
        self.trace = Trace()
        self.data_dependent = DataDependentPolicy(scope, self.trace.notes, moe_routing=moe_routing)
        """Values and data-dependent sizes a meta tensor lacks (``tracer/data_dependent/``)."""
        self._devices = frozenset(devices)
        self._counts_meta = "meta" in self._devices
        self._ops: dict[Any, tuple[str, Callable[..., int] | None]] = {}
        """Each op overload's name in the records and its flop formula, looked up once: formatting the name
        anew at every call costs more than the meta op itself."""
        self._sids: dict[int, int] = {}
        """``id(UntypedStorage)`` of each live storage -> its sid."""
        self._refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self._tensor_refs: dict[int, weakref.ref[torch.Tensor]] = {}
        """``id(tensor)`` -> weakref of every live tensor the program got from an op."""
        self._tensors_per_sid: dict[int, int] = {}
        """Live program tensors (views included, autograd's saved copies not) per storage."""
        self._held: dict[int, tuple[int, weakref.ref[torch.Tensor]]] = {}
        """``id(saved copy)`` -> (hold index, weakref): what autograd holds, until it lets go."""
        self._packing = False
        self._unit: tuple[str, int, int, tuple[int, ...], tuple[int, ...]] | None = None
        self._unit_order: dict[str, int] = {}
        self._nested_units = 0
        self._saved_hooks = saved_tensors_hooks(self._pack, self._unpack)
        self._patches = contextlib.ExitStack()

    def __enter__(self) -> MemoryTracer:
        self._patches.enter_context(collector_paused())
        self._patches.enter_context(native_meta_kernels())
        self._saved_hooks.__enter__()
        self._patches.enter_context(dispatched_rng_state())
        if "cpu" in self._devices:  # meta tensors stand for host ones
            self._patches.enter_context(host_checkpoint_device())
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._patches.close()
            self._saved_hooks.__exit__(*exc)
            self._refs.clear()  # frees after the trace ended are not part of it
            self._tensor_refs.clear()
            self._held.clear()

    def ignore_compile_internals(self) -> bool:  # type: ignore[override]
        """With ``compiled``, dynamo compiles as if no mode were on and runs the compiled graphs'
        ops through this one; otherwise (torch's default) compiled code falls back to eager here."""
        return self._compiled

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if self._packing:  # the tracer's own detach of a tensor autograd saves
            return func(*args, **kwargs)
        if func is _SCALAR_READ and args[0].device.type == "meta":
            return self.data_dependent.scalar(args[0])
        if any(is_wrapper_type(t) for t in types):  # the subclass's own ops come back here, on its inner tensors
            return NotImplemented
        inputs = tuple(self._sid_or_existing(t) for t in tensor_leaves((args, kwargs)) if self._counts(t))
        out = self.data_dependent.run(func, args, kwargs)
        known = self._ops.get(func)
        if known is None:
            known = self._ops[func] = (str(func.overloadpacket), flop_registry.get(func.overloadpacket))
        name, formula = known
        new = self._track_outputs(out, name)
        if self._workspaces is not None:
            for nbytes in self._workspaces(func, args, kwargs):
                self._transient(nbytes, f"{name}:workspace")
        self._record_op(name, inputs, new, 0 if formula is None else _flops(formula, args, kwargs, out))
        return out

    def record_kernel(self, name: str, inputs: Iterable[torch.Tensor], out: Any) -> None:
        """A kernel that ran outside dispatch: a fused kernel of compiled code reads ``inputs`` (the
        buffers it loads) and allocates ``out``, recorded as an op is (``vramsim/workload/compiled.py``)."""
        sids = tuple(self._sid_or_existing(t) for t in inputs if self._counts(t))
        self._record_op(name, sids, self._track_outputs(out, name), 0)

    def _track_outputs(self, out: Any, op: str) -> list[int]:
        """Count every tensor of ``out``; return the sids of the storages it allocated."""
        new: list[int] = []
        for tensor in tensor_leaves(out):
            if self._counts(tensor):
                sid, is_new = self._track(tensor, op)
                self._reference(tensor, sid)
                if is_new:
                    new.append(sid)
        return new

    def _record_op(self, name: str, inputs: tuple[int, ...], outputs: list[int], flops: int) -> None:
        self.trace.ops.append(
            OpRecord(
                index=len(self.trace.ops),
                name=name,
                module=self.scope.module,
                phase=self.scope.current_phase,
                step=self.scope.step,
                inputs=inputs,
                outputs=tuple(outputs),
                clock_after=len(self.trace.events),
                flops=flops,
            )
        )

    # -- facts reported by the workload -------------------------------------------------------

    def register_module(self, module: torch.nn.Module, prefix: str = "") -> None:
        """Account the weights and buffers that existed before tracing began; a weight's owner is
        its own name (``prefix`` + ``named_parameters()``'s, the first name of a tied one); tensors a
        quantized weight holds as attributes (its format's metadata) are part of that weight."""
        for name, param in module.named_parameters():
            self.mark(param, Category.PARAMETER, prefix + name)
            for attribute, tensor in attached_tensors(param):
                self.mark(tensor, Category.PARAMETER, f"{prefix}{name}.{attribute}")
        for buffer in module.buffers():
            self.mark(buffer, Category.BUFFER)

    def mark(self, tensor: torch.Tensor, category: Category, owner: str = "") -> None:
        """Record that ``tensor``'s storage plays ``category`` (for ``owner``, a parameter's name,
        where it belongs to one); the longest-lived role wins."""
        if not self._counts(tensor):
            return
        record = self.trace.storages[self._sid_or_existing(tensor)]
        if _PRIORITY[category] > _PRIORITY[record.category]:
            record.category = category
            record.owner = owner

    def mark_all(self, tensors: Iterable[Any], category: Category) -> None:
        """``mark`` every tensor found in a nested structure."""
        for item in tensors:
            if isinstance(item, torch.Tensor):
                self.mark(item, category)

    def begin_unit(self, module: str, tensors: Iterable[Any], positional: Iterable[Any] = ()) -> None:
        """A checkpointable block begins, called with ``tensors``, of which ``positional`` were passed
        positionally (see ``UnitRecord``). A block inside another (Zamba's shared layer, Swin's blocks in a
        stage) is only counted."""
        if self._unit is not None:
            self._nested_units += 1
            self.trace.nested_units = True
            return
        inputs = tuple(dict.fromkeys(self._sid_or_existing(t) for t in tensors if self._counts(t)))
        saved = tuple(dict.fromkeys(self._sid_or_existing(t) for t in positional if self._counts(t)))
        self._unit = (module, len(self.trace.events), len(self.trace.ops), inputs, saved)

    def end_unit(self) -> None:
        if self._nested_units:
            self._nested_units -= 1
            return
        assert self._unit is not None, "end_unit without begin_unit"
        module, first_clock, first_op, inputs, saved = self._unit
        self._unit = None
        index = self._unit_order.setdefault(module, len(self._unit_order))
        self.trace.units.append(
            UnitRecord(
                module=module,
                step=self.scope.step,
                index=index,
                first_clock=first_clock,
                last_clock=len(self.trace.events),
                first_op=first_op,
                last_op=len(self.trace.ops) - 1,
                inputs=inputs,
                saved_inputs=saved,
            )
        )

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
            and ((self._counts_meta and obj.is_meta) or obj.device.type in self._devices)  # is_meta: no device object
            and obj.layout is torch.strided
            and not is_wrapper_subclass(obj)
        )

    def sid_of(self, tensor: torch.Tensor) -> int | None:
        """The storage id the trace gave ``tensor``'s storage; ``None`` if it never saw it."""
        return self._sids.get(id(tensor.untyped_storage()))

    def _sid_or_existing(self, tensor: torch.Tensor) -> int:
        """An input's storage; one never seen before existed before tracing began."""
        sid = self._sids.get(id(tensor.untyped_storage()))
        return sid if sid is not None else self._track(tensor, "<pre-existing>", clock=BEFORE_TRACE)[0]

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
        self._refs[key] = weakref.ref(storage, partial(self._free, key, sid))
        return sid, True

    def _transient(self, nbytes: int, op: str) -> None:
        """A buffer a kernel allocates and frees inside one op, after its outputs."""
        sid = len(self.trace.storages)
        self.trace.events.append((sid, True))
        self.trace.storages.append(
            StorageRecord(
                sid=sid,
                nbytes=nbytes,
                shape=(nbytes,),
                dtype="uint8",
                device="meta",
                op=op,
                module=self.scope.module,
                phase=self.scope.current_phase,
                step=self.scope.step,
                alloc_clock=len(self.trace.events),
            )
        )
        self.trace.events.append((sid, False))
        self.trace.storages[sid].free_clock = len(self.trace.events)

    def _reference(self, tensor: torch.Tensor, sid: int) -> None:
        """Count ``tensor`` among the program's references to storage ``sid`` until it dies."""
        key = id(tensor)
        ref = self._tensor_refs.get(key)
        if ref is not None and ref() is tensor:
            return  # an in-place op hands back the tensor it was given
        self._tensor_refs[key] = weakref.ref(tensor, partial(self._dereference, key, sid))
        self._tensors_per_sid[sid] = self._tensors_per_sid.get(sid, 0) + 1

    def _dereference(self, key: int, sid: int, ref: weakref.ref[torch.Tensor]) -> None:
        if self._tensor_refs.get(key) is ref:
            del self._tensor_refs[key]
        left = self._tensors_per_sid[sid] - 1
        self._tensors_per_sid[sid] = left
        record = self.trace.storages[sid]
        if left == 0 and record.unreferenced_clock is None:
            record.unreferenced_clock = len(self.trace.events)

    def _free(self, key: int, sid: int, _ref: object = None) -> None:
        self.trace.events.append((sid, False))
        self.trace.storages[sid].free_clock = len(self.trace.events)
        del self._sids[key]
        del self._refs[key]

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """Mark what autograd saves, and hand it back detached: the hook receives a saved output
        with its ``grad_fn``, and keeping that tensor would close a cycle (grad_fn -> saved
        variable -> tensor -> grad_fn) that nothing frees where backward never runs, such as a
        branch the loss does not use (pytorch/pytorch#153049; autograd stores ``tensor_data()``
        for saved outputs in saved_variable.cpp to avoid the same cycle)."""
        if self.scope.phase in (Phase.FORWARD, Phase.BACKWARD):
            self.mark(tensor, Category.ACTIVATION)
        self._packing = True
        try:
            saved = tensor.detach()
        finally:
            self._packing = False
        if self._counts(tensor):
            index = len(self.trace.holds)
            self.trace.holds.append(
                HoldRecord(
                    sid=self._sid_or_existing(tensor),
                    op=len(self.trace.ops),
                    unit=None if self._unit is None else len(self.trace.units),
                    nbytes=tensor.numel() * tensor.element_size(),
                    pack_clock=len(self.trace.events),
                )
            )
            key = id(saved)
            self._held[key] = (index, weakref.ref(saved, partial(self._release, key)))
        return saved

    def _unpack(self, saved: torch.Tensor) -> torch.Tensor:
        held = self._held.get(id(saved))
        if held is not None:
            hold = self.trace.holds[held[0]]
            if hold.unpack_clock is None:
                hold.unpack_clock = len(self.trace.events)
        return saved

    def _release(self, key: int, _ref: object = None) -> None:
        index, _ = self._held.pop(key)
        self.trace.holds[index].release_clock = len(self.trace.events)


_SCALAR_READ = torch.ops.aten._local_scalar_dense.default


def _flops(formula: Callable[..., int], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    # The out_dtype overloads (addmm.dtype_out) pass a dtype where the formulas take out_shape: a dtype is no shape.
    return int(formula(*(a for a in args if not isinstance(a, torch.dtype)), **kwargs, out_val=out))
