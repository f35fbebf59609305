"""Activation checkpointing put into a model, at the model's own checkpointing call sites.

transformers' decoder layers (``GradientCheckpointingLayer``) and diffusers' blocks call
``self._gradient_checkpointing_func(fn, *args)`` when checkpointing is on. vramsim puts one of
two functions there:

- ``UnitMarker``, for the traced program: it runs ``fn`` as is and tells the observer where each
  call begins and ends, so the graph knows the blocks a checkpoint would wrap and what they were
  given, while the program's memory stays that of no checkpointing at all;
- the real ``torch.utils.checkpoint`` (full, every K-th block, selective) or
  ``torch.autograd.graph.save_on_cpu`` (offload), for a real run or a re-trace that checks the
  graph's what-if.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing_plan import CheckpointPlan
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.tracer.leaves import tensor_leaves

__all__ = ["UnitMarker", "UnitObserver", "apply_checkpointing", "install_unit_marker", "saved_tensor_context"]

ContextFn = Callable[[], tuple[contextlib.AbstractContextManager[Any], contextlib.AbstractContextManager[Any]]]


class UnitObserver(Protocol):
    def begin_unit(self, module: str, tensors: Any, positional: Any = ()) -> None: ...
    def end_unit(self) -> None: ...


class UnitMarker:
    """Reports the bounds of each block a checkpoint would wrap, and what it was given, while the
    block runs unchanged."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._names = {id(module): name for name, module in model.named_modules()}
        self.observer: UnitObserver | None = None

    def name_within(self, root: torch.nn.Module) -> None:
        """Name each block by its path in ``root``, the wrapper the program runs (peft's ``PeftModel``), as the
        graph names the blocks' parameters: FSDP's and ZeRO-3's groups and the pipeline's layers are found by it."""
        self._names = {id(module): name for name, module in root.named_modules()}

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        """diffusers' checkpoint call site: ``_gradient_checkpointing_func(block, *args)``."""
        self._begin(fn, args, {})
        try:
            return fn(*args)
        finally:
            self._end()

    def hook(self, module: torch.nn.Module) -> None:
        """transformers' ``GradientCheckpointingLayer``: marked by forward hooks, since turning its
        checkpointing on also rewrites its arguments (``use_cache=False``), which would change the
        program that runs without checkpointing."""
        module.register_forward_pre_hook(lambda mod, args, kwargs: self._begin(mod, args, kwargs), with_kwargs=True)
        module.register_forward_hook(lambda mod, args, out: self._end(), always_call=True)

    def _begin(self, block: Any, args: Any, kwargs: dict[str, Any]) -> None:
        if self.observer is not None:
            self.observer.begin_unit(self._names.get(id(block), ""), tensor_leaves((args, kwargs)), tensor_leaves(args))

    def _end(self) -> None:
        if self.observer is not None:
            self.observer.end_unit()


def supports_checkpointing(model: torch.nn.Module) -> bool:
    """transformers' flag, or diffusers' private one."""
    flags = ("supports_gradient_checkpointing", "_supports_gradient_checkpointing")
    return any(getattr(model, flag, False) for flag in flags)


def _diffusers_mixin(model: torch.nn.Module) -> Any:
    """diffusers' ``ModelMixin`` where ``model`` is one, else None. diffusers is imported only if in use (its
    models import it): importing it for a transformers model would cost about a second."""
    modeling = sys.modules.get("diffusers.models.modeling_utils")
    return modeling.ModelMixin if modeling is not None and isinstance(model, modeling.ModelMixin) else None


def install_unit_marker(model: torch.nn.Module) -> UnitMarker | None:
    """Put a ``UnitMarker`` at the model's checkpointing call sites (``None``: the model has none)."""
    if not supports_checkpointing(model):
        return None
    marker = UnitMarker(model)
    mixin = _diffusers_mixin(model)
    if mixin is not None:
        mixin.enable_gradient_checkpointing(model, marker)
        return marker

    layers = _checkpointing_layers(model)
    for layer in layers:
        marker.hook(layer)
    return marker if layers else None


def apply_checkpointing(model: torch.nn.Module, plan: CheckpointPlan, emulation: KernelEmulation | None) -> None:
    """Checkpoint the model's blocks as ``plan`` says, with torch's own checkpoint (non-reentrant,
    transformers' default); ``offload`` is applied around the forward (``saved_tensor_context``)."""
    if plan.kind in ("none", "offload"):
        return
    if not supports_checkpointing(model):
        raise ConfigError(
            f"{type(model).__name__} does not support gradient checkpointing; use checkpointing='none' or 'offload'"
        )
    from transformers import PreTrainedModel

    mixin = _diffusers_mixin(model)
    full, selective = _context_fn(plan, emulation, selective=False), _context_fn(plan, emulation, selective=True)
    full_kwargs: dict[str, Any] = {"use_reentrant": False, "context_fn": full}
    if isinstance(model, PreTrainedModel) and _layer_class() is None:  # older transformers: one function for all layers
        if plan.kind != "full":
            raise UnsupportedError(
                f"checkpointing={plan.spec!r} checkpoints layers one by one, which needs "
                "transformers' GradientCheckpointingLayer; this transformers checkpoints all layers "
                "alike: use 'full'"
            )
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=full_kwargs)
    elif isinstance(model, PreTrainedModel):  # its own public switch, then each layer as the plan says
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=full_kwargs)
        _per_layer(model, plan, selective)
    elif mixin is not None:  # takes the function to call at each block
        mixin.enable_gradient_checkpointing(model, _PerBlock(plan, full, selective))
    else:
        raise ConfigError(f"{type(model).__name__} has no checkpointing switch vramsim knows; use checkpointing='offload'")


def saved_tensor_context(plan: CheckpointPlan) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """What the forward runs under: ``save_on_cpu`` for ``offload``, nothing otherwise."""
    if plan.kind == "offload":
        return lambda: torch.autograd.graph.save_on_cpu(pin_memory=torch.cuda.is_available())
    return contextlib.nullcontext


def _per_layer(model: torch.nn.Module, plan: CheckpointPlan, selective: ContextFn) -> None:
    """A transformers model checkpointing every layer in full, made to follow ``plan``: the layers it does not
    checkpoint switched off, its selective ones given the selective policy (layers in module order, as
    transformers' ``every_n_layers`` counts them)."""
    for index, layer in enumerate(_checkpointing_layers(model)):
        layer_any: Any = layer  # transformers' attributes, which Module's typing does not know
        if not plan.checkpointed(index):
            layer_any.gradient_checkpointing = False
        elif plan.selective_at(index):
            layer_any._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False, context_fn=selective)


class _PerBlock:
    """diffusers' default checkpoint function, applied to the blocks ``plan`` checkpoints (each with its
    policy): blocks are numbered in the order they first run (``UnitRecord.index``)."""

    def __init__(self, plan: CheckpointPlan, full: ContextFn, selective: ContextFn) -> None:
        self._plan = plan
        self._full = full
        self._selective = selective
        self._order: dict[int, int] = {}

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        index = self._order.setdefault(id(fn), len(self._order))
        if not self._plan.checkpointed(index):
            return fn(*args)
        context_fn = self._selective if self._plan.selective_at(index) else self._full
        return checkpoint(fn, *args, use_reentrant=False, context_fn=context_fn)


def _layer_class() -> type[torch.nn.Module] | None:
    """transformers' ``GradientCheckpointingLayer``, the checkpointing call site of each layer; older releases
    (4.42) have none: their models call one ``_gradient_checkpointing_func`` in their layer loop."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:
        return None
    return GradientCheckpointingLayer


def _checkpointing_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's layers that checkpoint themselves, in module order (none in a transformers without the class)."""
    layer_class = _layer_class()
    return [] if layer_class is None else [module for module in model.modules() if isinstance(module, layer_class)]


def _context_fn(plan: CheckpointPlan, emulation: KernelEmulation | None, *, selective: bool) -> ContextFn:
    """Recompute runs inside autograd's engine, which drops torch-function modes: the emulation
    re-enters there; a selective block adds the op policy's caching and cached modes."""
    emulated = emulation.checkpoint_contexts if emulation is not None else _no_contexts
    if not selective:
        return emulated

    def contexts() -> tuple[contextlib.AbstractContextManager[Any], contextlib.AbstractContextManager[Any]]:
        forward, recompute = create_selective_checkpoint_contexts(_Policy(plan))  # a fresh count per block
        emulated_forward, emulated_recompute = emulated()
        return _both(emulated_forward, forward), _both(emulated_recompute, recompute)

    return contexts


def _no_contexts() -> tuple[contextlib.AbstractContextManager[Any], contextlib.AbstractContextManager[Any]]:
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Policy:
    """The plan's selective policy for one block's checkpoint: its matmuls counted apart in the forward and
    in the recompute, as torchtitan's policy counts them (``CheckpointPlan.saves``)."""

    def __init__(self, plan: CheckpointPlan) -> None:
        self._plan = plan
        self._matmuls = {False: 0, True: 0}

    def __call__(self, ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        name = str(op.overloadpacket)
        self._matmuls[ctx.is_recompute] += name == "aten.mm"
        if self._plan.saves(name, self._matmuls[ctx.is_recompute]):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE


class _both(contextlib.ExitStack):
    """Two contexts entered as one. It keeps both for its whole life, as checkpoint keeps a plain
    recompute context: selective checkpointing's cache lives in the recompute mode until the
    checkpoint's frame dies (a generator-based wrapper would drop it when the replay ends)."""

    def __init__(self, outer: contextlib.AbstractContextManager[Any], inner: contextlib.AbstractContextManager[Any]) -> None:
        super().__init__()
        self.outer = outer
        self.inner = inner

    def __enter__(self) -> _both:
        super().__enter__()
        self.enter_context(self.outer)
        self.enter_context(self.inner)
        return self
