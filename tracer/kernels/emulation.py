"""Emulate a target's kernel choices and autocast on meta tensors, which have neither.

Meta tensors take PyTorch's device-agnostic paths: ``scaled_dot_product_attention`` falls to
the math kernel (materialising the attention matrix) and ``torch.autocast`` ignores them. A
``TorchFunctionMode`` above autograd re-routes those calls the way the target's dispatcher
would, so autograd records the same casts and saves the same tensors as on the device.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from ..patches import checkpoint_recomputes_under, emulated_autocast, foreach_clipping_on_meta, fused_optimizers_on_meta

__all__ = ["AttentionCall", "KernelEmulation", "KernelRules"]


@dataclass(frozen=True, slots=True)
class AttentionCall:
    """The arguments of one ``scaled_dot_product_attention`` call that backend selection reads."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_mask: torch.Tensor | None
    dropout_p: float
    is_causal: bool
    scale: float | None
    enable_gqa: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelRules:
    """How one target's dispatcher behaves where meta execution differs from it."""

    default_autocast_dtype: torch.dtype
    """autocast's dtype when none is given (bfloat16 on CPU, float16 on CUDA)."""
    lower_precision_ops: frozenset[str]
    """Ops autocast runs in the lower precision dtype."""
    fp32_ops: frozenset[str]
    """Ops autocast runs in float32."""
    promote_ops: frozenset[str]
    """Ops autocast runs in the widest floating dtype among their inputs."""
    fp32_dtype_ops: frozenset[str] = frozenset()
    """Ops autocast runs in float32 by passing ``dtype=torch.float32`` (no cast of the input)."""
    attention: Callable[[AttentionCall], torch.Tensor | None]
    """Runs SDPA with the target's kernel, or returns None to keep the math path."""
    workspaces: Callable[[Any, tuple[Any, ...], dict[str, Any]], list[int]] | None = None
    """Scratch bytes a kernel allocates inside an op (see ``MemoryTracer``)."""
    output_layouts: Callable[[Any, tuple[Any, ...], dict[str, Any], Any], Any] | None = None
    """``(op, args, kwargs, out) -> out`` restrided as the target's kernels allocate it, where
    meta kernels pick other strides; applied under the tracer, so it sees the target's strides."""
    functions: Mapping[Callable[..., Any], Callable[..., Any]] = field(default_factory=dict)
    """Python functions run through the target's own composite where its C++ branches on the device."""


_FUNCTION_ALIASES = {
    "__matmul__": "matmul",
    "__rmatmul__": "matmul",
    "cross_entropy": "cross_entropy_loss",
}
"""Python-level names whose aten op (the name autocast lists use) is spelled differently."""


class KernelEmulation(TorchFunctionMode):
    """Routes SDPA to the target's kernel and applies the target's autocast policy.

    Autocast acts at the outermost call, as the real one does: while an op runs, nested calls
    are not cast again. Known limitations: ops inside a C++ composite that is not itself on an
    autocast list (e.g. ``einsum`` -> ``bmm``) are not cast.
    """

    def __init__(self, rules: KernelRules) -> None:
        super().__init__()
        self.rules = rules
        self._autocast: list[tuple[bool, torch.dtype]] = []
        self._cast_cache: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        """``id(source)`` -> (weakref to the source, its cast); the weakref guards against a
        reused id, as autocast's weak_intrusive_ptr key does."""
        self._patches = contextlib.ExitStack()
        self._replacing: set[Any] = set()
        """Functions whose replacement is running with this mode re-entered (see ``__torch_function__``)."""
        self._depth = 0
        self._layouts = _OutputLayouts(rules.output_layouts) if rules.output_layouts else None

    @contextlib.contextmanager
    def autocast(self, dtype: torch.dtype | None = None, enabled: bool = True) -> Iterator[None]:
        """``torch.autocast`` for the target; the outermost exit clears the weight-cast cache."""
        current = self._autocast[-1][1] if self._autocast else self.rules.default_autocast_dtype
        self._autocast.append((enabled, dtype or current))
        try:
            yield
        finally:
            self._autocast.pop()
            if not self._autocast:
                self._cast_cache.clear()

    def autocast_dtype(self) -> torch.dtype | None:
        """The emulated autocast's dtype while it is on, else None (``torch.get_autocast_dtype`` on the target)."""
        enabled, dtype = self._autocast[-1] if self._autocast else (False, torch.float32)
        return dtype if enabled else None

    def __enter__(self) -> KernelEmulation:
        if self._depth == 0:
            self._patches.enter_context(emulated_autocast(self._maybe_autocast))
            self._patches.enter_context(fused_optimizers_on_meta())
            self._patches.enter_context(foreach_clipping_on_meta())
            self._patches.enter_context(checkpoint_recomputes_under(self.recomputing))
            if self._layouts is not None:
                self._layouts.__enter__()
        self._depth += 1
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._depth -= 1
            if self._depth == 0:
                try:
                    if self._layouts is not None:
                        self._layouts.__exit__(*exc)
                finally:
                    self._patches.close()

    def checkpoint_contexts(self) -> tuple[contextlib.AbstractContextManager[Any], contextlib.AbstractContextManager[Any]]:
        """``context_fn`` for ``torch.utils.checkpoint``: recompute runs inside autograd's engine,
        which drops torch-function modes, so re-enter this one there with the forward's autocast
        state, as checkpoint itself restores the real autocast state."""
        state = self._autocast[-1] if self._autocast else None
        return contextlib.nullcontext(), self._recompute(state)

    def recomputing(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` as a checkpoint runs it: where this mode is off (the recompute, in autograd's
        engine) it is re-entered with the autocast state of the forward that checkpointed ``function``."""
        state = self._autocast[-1] if self._autocast else None

        def run(*args: Any, **kwargs: Any) -> Any:
            if self in torch.overrides._get_current_function_mode_stack():
                return function(*args, **kwargs)
            with self._recompute(state):
                return function(*args, **kwargs)

        return run

    @contextlib.contextmanager
    def _recompute(self, state: tuple[bool, torch.dtype] | None) -> Iterator[None]:
        with self, self.autocast(state[1], state[0]) if state else contextlib.nullcontext():
            yield

    def _maybe_autocast(
        self, device_type: str, dtype: torch.dtype | None = None, enabled: bool = True, cache_enabled: bool | None = None
    ) -> contextlib.AbstractContextManager[Any]:
        """Same contract as transformers' ``maybe_autocast``, against the emulated state; models
        import it by name, and ``patches.emulated_autocast`` routes all of them here."""
        active = bool(self._autocast) and self._autocast[-1][0]
        if active or enabled:
            return self.autocast(dtype, enabled)
        return contextlib.nullcontext()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.Tensor.__format__ and args[0].is_meta and args[0].dim() == 0:
            return format(args[0].item(), *args[1:])  # f"{t}" of a scalar: its value, per the tracer's policy
        if func in (torch.tensor, torch.as_tensor) and _is_meta(kwargs.get("device")) and not kwargs.get("requires_grad"):
            # torch/csrc/utils/tensor_new.cpp internal_new_from_data fills a host tensor and copies it
            # to the device; for meta nothing is dispatched. A dispatched copy lets the tracer see the
            # allocation and keep the values for a program that reads them back (.tolist()). Meta
            # scalars in the data are read through the tracer's value policy, as the host reads them.
            data = tree_map(lambda a: a.tolist() if isinstance(a, torch.Tensor) and a.is_meta else a, args[0])
            return func(data, *args[1:], **{**kwargs, "device": "cpu"}).to("meta")
        name = _FUNCTION_ALIASES.get(getattr(func, "__name__", ""), getattr(func, "__name__", ""))
        enabled, dtype = self._autocast[-1] if self._autocast else (False, torch.float32)
        if enabled:
            args, kwargs = self._autocast_args(name, dtype, args, kwargs)
        if func is F.scaled_dot_product_attention:
            out = self.rules.attention(_attention_call(*args, **kwargs))
            if out is not None:
                return out
        replacement = None if func in self._replacing else self.rules.functions.get(func)
        if replacement is None:
            return func(*args, **kwargs)
        if enabled and not self._listed(name):
            # A composite on no autocast list: the ops inside it meet autocast, as at:: calls do; a
            # replacement that falls back to the function it replaces gets the function itself.
            self._replacing.add(func)
            try:
                with self:
                    return replacement(*args, **kwargs)
            finally:
                self._replacing.discard(func)
        return replacement(*args, **kwargs)

    def _listed(self, name: str) -> bool:
        rules = self.rules
        return any(name in ops for ops in (rules.lower_precision_ops, rules.fp32_ops, rules.fp32_dtype_ops, rules.promote_ops))

    def _autocast_args(self, name: str, dtype: torch.dtype, args: Any, kwargs: Any) -> tuple[Any, Any]:
        if name in self.rules.lower_precision_ops:
            return tree_map(lambda a: self._cast(a, dtype), (args, kwargs))
        if name in self.rules.fp32_ops:
            return tree_map(lambda a: self._cast(a, torch.float32), (args, kwargs))
        if name in self.rules.fp32_dtype_ops and kwargs.get("dtype") is None:
            inputs = [a for a in (*args, *kwargs.values()) if _eligible(a)]
            if inputs and inputs[0].dtype != torch.float32:
                return args, {**kwargs, "dtype": torch.float32}
            return args, kwargs
        if name in self.rules.promote_ops:
            widest = _widest(args, kwargs)
            if widest is not None:
                return tree_map(lambda a: self._cast(a, widest), (args, kwargs))
        return args, kwargs

    def _cast(self, arg: Any, dtype: torch.dtype) -> Any:
        """autocast_mode.cpp ``cached_cast``: fp32 leaf weights cast to lower precision are cached."""
        if not _eligible(arg) or arg.dtype == dtype:
            return arg
        cacheable = (
            dtype != torch.float32 and arg.dtype == torch.float32 and arg.requires_grad and arg.is_leaf and arg._base is None
        )
        if not cacheable:
            return arg.to(dtype)
        entry = self._cast_cache.get(id(arg))
        if entry is not None and entry[0]() is arg:
            return entry[1]
        cast = arg.to(dtype)
        self._cast_cache[id(arg)] = (weakref.ref(arg), cast)
        return cast


class _OutputLayouts(TorchDispatchMode):
    """Applies ``KernelRules.output_layouts`` to every op's result; entered before the tracer,
    so it sits under it on the dispatch-mode stack."""

    def __init__(self, rule: Callable[[Any, tuple[Any, ...], dict[str, Any], Any], Any]) -> None:
        super().__init__()
        self._rule = rule

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """Compiled graphs' ops are restrided too; whether torch.compile runs at all under the
        tracer is the tracer's to say (dynamo falls back to eager while any mode on the stack objects)."""
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        return self._rule(func, args, kwargs, func(*args, **kwargs))


def _is_meta(device: Any) -> bool:
    return device is not None and torch.device(device).type == "meta"


def _eligible(arg: Any) -> bool:
    """autocast_mode.h ``is_eligible``: floating tensors other than float64."""
    return isinstance(arg, torch.Tensor) and arg.is_floating_point() and arg.dtype != torch.float64


def _widest(args: Any, kwargs: Any) -> torch.dtype | None:
    dtypes = [a.dtype for a in (*args, *kwargs.values()) if _eligible(a)]
    return max(dtypes, key=lambda d: torch.finfo(d).bits) if dtypes else None


def _attention_call(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> AttentionCall:
    return AttentionCall(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def boolean_mask_to_additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """attention.cpp ``convert_boolean_attn_mask``: a bool mask becomes 0 / -inf in the query dtype."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(
        mask.logical_not(),
        torch.scalar_tensor(-math.inf, dtype=dtype, device=mask.device),
        torch.scalar_tensor(0.0, dtype=dtype, device=mask.device),
    )
