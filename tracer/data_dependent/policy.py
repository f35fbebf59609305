"""``DataDependentPolicy``: runs ops and answers value reads on meta tensors (see the package docstring)."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from vramsim.errors import UnsupportedError

from ..categories import Phase
from ..kernels.torchao_int4 import tinygemm_mm_on_meta
from ..leaves import tensor_leaves
from .bounds import Bound, Bounds, check_lookup
from .fallbacks import FALLBACKS, grouped_mm_shape
from .routing import parse_routing
from .shadows import NOTE_INPUTS, SEEDS, SHADOW_LIMIT, Shadows

__all__ = ["NOTE_BOOL", "NOTE_SELECT_ALL", "DataDependentPolicy"]

aten = torch.ops.aten

FACTORY_LIMIT = 1 << 16
"""Largest factory result (``zeros``, ``arange``...) given a shadow."""
NOTE_BOOL = "boolean reads of tensor values (e.g. mask.all()) are assumed True: no padding, no packing"
NOTE_SELECT_ALL = (
    "data-dependent sizes over values vramsim cannot know assume every element is selected "
    "(nonzero, torch.where(cond), boolean indexing, masked_select keep all; unique finds all distinct; "
    "bincount has max(minlength, n) bins)"
)
NOTE_GROUPED_MM = "torch._grouped_mm on meta: output shaped by the kernel's rule for any dtype (the meta check accepts bf16 only)"
NOTE_NO_OVERFLOW = "GradScaler: no inf/NaN in the scaled fp16 gradients (found_inf = 0), so every scaler.step runs optimizer.step"

_FACTORIES = {
    aten.zeros.default, aten.ones.default, aten.full.default, aten.scalar_tensor.default,
    aten.arange.default, aten.arange.start, aten.arange.start_step, aten.eye.default, aten.eye.m,
    aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
}  # fmt: skip
_LIKE = {aten.zeros_like.default, aten.ones_like.default, aten.full_like.default}
_CTC = {aten._ctc_loss.default, aten._ctc_loss.Tensor, aten._ctc_loss_backward.default, aten._ctc_loss_backward.Tensor}
_INDEX_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
_ROUTING_INDICES = {aten.topk.default: 1, aten.max.dim: 1, aten.argmax.default: 0}
"""Ops whose indices pick experts in routers -> position of the indices in their outputs."""


class DataDependentPolicy:
    """Runs ops and answers value reads on meta tensors under the stated assumptions.

    ``run`` replaces ``func(*args, **kwargs)`` in a dispatch mode; ``scalar`` answers
    ``aten._local_scalar_dense``. ``notes`` receives each assumption once, when it shapes a
    value the program reads or a size it allocates.
    """

    def __init__(self, scope: Any, notes: list[str], *, moe_routing: Any = "balanced") -> None:
        self._scope = scope
        self._notes = notes
        self.routing = parse_routing(moe_routing)
        self._shadows = Shadows()
        self._bounds = Bounds()
        self._writes: dict[Any, tuple[int, ...]] = {}

    # -- entry points ------------------------------------------------------------------------

    def scalar(self, tensor: torch.Tensor) -> bool | int | float:
        """The value ``.item()`` / ``int()`` / ``bool()`` reads from a meta tensor."""
        known = self._values(tensor)
        if known is not None:
            values, origins = known
            self._note(*origins)
            return values.reshape(()).item()
        if self._scope.phase is Phase.OPTIMIZER and tensor.numel() == 1 and tensor.dtype is not torch.bool:
            return self._scope.step + 1
        if tensor.dtype is torch.bool:
            self._note(NOTE_BOOL)
            return True
        raise UnsupportedError(_unknown_read(tensor, self._scope))

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``func(*args, **kwargs)``, with meta-device gaps filled by the stated assumptions; a lookup
        past its table is refused and the bounds of index values followed (``bounds.py``)."""
        check_lookup(func, args, self._bound, self._scope.module)
        out = self._run(func, args, kwargs)
        self._bounds.follow(func, args, kwargs, out, self._bound)
        return out

    def _run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func is aten._grouped_mm.default:
            return self._grouped_mm(func, args, kwargs)
        if func is aten._weight_int4pack_mm.default and args[0].device.type == "meta":
            return tinygemm_mm_on_meta(*args, **kwargs)
        if func is aten._to_copy.default:
            return self._to_copy(func, args, kwargs)
        if func is aten._amp_foreach_non_finite_check_and_unscale_.default:
            return self._unscale(func, args, kwargs)
        if func in _FACTORIES:
            return self._factory(func, args, kwargs)
        if func in _CTC and args[0].device.type == "meta":
            return self._ctc(func, args, kwargs)
        if func in _INDEX_OPS and _has_mask_index(args):
            args = (args[0], self._mask_indices(args[1]), *args[2:])
        flat: list[Any] = []
        metas: list[torch.Tensor] = []
        if self._shadows or SEEDS:
            metas = [t for t in tensor_leaves((args, kwargs)) if t.device.type == "meta"]
            known = [self._known(t) for t in metas]
            if any(known):
                if all(known):
                    flat, spec = tree_flatten((args, kwargs))
                    return self._run_on_values(func, flat, spec, metas)
                self._forget_written(func, args, kwargs)
        try:
            out = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):
            moved = _cpu_scalars_on_meta(args, kwargs)
            if moved is not None:
                return func(*moved[0], **moved[1])
            fallback = FALLBACKS.get(func.overloadpacket)
            if fallback is None:
                raise
            if not flat:
                flat, spec = tree_flatten((args, kwargs))
                metas = [a for a in flat if isinstance(a, torch.Tensor) and a.device.type == "meta"]
            if not metas:
                raise
            selected = self._assume_selected(func, flat, spec, metas)
            if selected is not None:
                return selected
            self._note(NOTE_SELECT_ALL)
            return fallback(*args, **kwargs)
        if func in _ROUTING_INDICES and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
            self._route(func, args, kwargs, out)
        return out

    # -- shadows -----------------------------------------------------------------------------

    def _bound(self, tensor: torch.Tensor) -> Bound | None:
        """The least and greatest of ``tensor``'s values, where they follow from shapes or are held."""
        followed = self._bounds.get(tensor)
        if followed is not None:
            return followed
        known = self._values(tensor)
        if known is None or known[0].numel() == 0:
            return None
        values, origins = known
        source = "the synthesised token ids" if NOTE_INPUTS in origins else "values known on meta"
        return Bound(int(values.min()), int(values.max()), source)

    def _known(self, tensor: torch.Tensor) -> bool:
        return self._shadows.has(tensor) or SEEDS.has(tensor)

    def _values(self, tensor: torch.Tensor) -> tuple[torch.Tensor, frozenset[str]] | None:
        return self._shadows.get(tensor) or SEEDS.get(tensor)

    def _run_on_values(self, func: Any, flat: list[Any], spec: Any, metas: list[torch.Tensor]) -> Any:
        origins: frozenset[str] = frozenset()
        cpu_flat: list[Any] = []
        for item in flat:
            if isinstance(item, torch.Tensor) and item.device.type == "meta":
                known = self._values(item)
                if known is None:  # a dtype reinterpretation: values unknown after all
                    args, kwargs = tree_unflatten(flat, spec)
                    self._forget_written(func, args, kwargs)
                    return func(*args, **kwargs)
                cpu_flat.append(known[0])
                origins |= known[1]
            elif isinstance(item, torch.device) and item.type == "meta":
                cpu_flat.append(torch.device("cpu"))
            else:
                cpu_flat.append(item)
        args, kwargs = tree_unflatten(flat, spec)
        cpu_args, cpu_kwargs = tree_unflatten(cpu_flat, spec)
        try:
            out = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):
            out = None  # a data-dependent size: the values decide it
        if out is not None and _numel(out) > SHADOW_LIMIT:
            self._forget_written(func, args, kwargs)
            return out
        try:
            with torch._C.DisableTorchFunction(), torch.no_grad():
                cpu_out = _on_cpu(func, cpu_args, cpu_kwargs)
        except (NotImplementedError, RuntimeError):
            if out is None:
                raise
            self._forget_written(func, args, kwargs)
            return out
        if out is None:
            self._note(*origins)
            out = tree_map(_meta_like, cpu_out)
        self._attach(out, cpu_out, origins)
        return out

    def _attach(self, out: Any, values: Any, origins: frozenset[str]) -> None:
        outs, _ = tree_flatten(out)
        vals, _ = tree_flatten(values)
        for meta, cpu in zip(outs, vals, strict=False):
            fresh = isinstance(meta, torch.Tensor) and meta.device.type == "meta" and not self._known(meta)
            if fresh and isinstance(cpu, torch.Tensor):  # views and in-place results share their input's shadow
                self._shadows.set(meta, cpu, origins)

    def _forget_written(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An op that writes a shadowed storage without being run on values makes it unknown."""
        positions = self._writes.get(func)
        if positions is None:
            positions = self._writes[func] = tuple(
                i for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write
            )
        schema = func._schema.arguments
        for i in positions:
            target = args[i] if i < len(args) else kwargs.get(schema[i].name)
            for t in tree_flatten(target)[0]:
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    self._shadows.drop(t)
                    SEEDS.drop(t)

    # -- special ops -------------------------------------------------------------------------

    def _factory(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and out.device.type == "meta" and out.numel() <= FACTORY_LIMIT:
            if func in _LIKE:
                fill = {aten.zeros_like.default: 0, aten.ones_like.default: 1}.get(func, args[1] if len(args) > 1 else None)
                if fill is not None:
                    self._shadows.set(out, torch.full(out.shape, fill, dtype=out.dtype, device="cpu"), frozenset())
            else:
                cpu_kwargs = {**kwargs, "device": torch.device("cpu")}
                with torch._C.DisableTorchFunction():
                    self._shadows.set(out, func(*args, **cpu_kwargs), frozenset())
        return out

    def _to_copy(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        source = args[0]
        target = kwargs.get("device")
        if source.device.type != "meta":
            out = func(*args, **kwargs)
            if out.device.type == "meta" and source.numel() <= SHADOW_LIMIT and not isinstance(source, torch.nn.Parameter):
                self._shadows.set(out, source.detach().to(out.dtype), frozenset())
            return out
        if target is None or torch.device(target).type == "meta":
            flat, spec = tree_flatten((args, kwargs))
            if self._known(source):
                return self._run_on_values(func, flat, spec, [source])
            return func(*args, **kwargs)
        # meta -> host: the program reads the values (.cpu(), .tolist(), .numpy()).
        known = self._values(source)
        if known is not None:
            values, origins = known
            self._note(*origins)
        elif source.dtype is torch.bool:
            values = torch.ones(source.shape, dtype=torch.bool, device="cpu")
            self._note(NOTE_BOOL)
        elif self._scope.phase is Phase.BACKWARD or _offloading():
            # Autograd moving a gradient back to a host tensor, or save_on_cpu moving a saved
            # activation there until backward: values are carried, not read.
            values = torch.empty(source.shape, dtype=source.dtype, device="cpu")
        else:
            raise UnsupportedError(_unknown_read(source, self._scope))
        rest = {k: v for k, v in kwargs.items() if k not in ("device", "non_blocking")}
        with torch._C.DisableTorchFunction(), torch.no_grad():
            return func(values, **rest, device=target)

    def _unscale(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The scaler's inf check writes ``found_inf``; assume it found none (assumption 4)."""
        out = func(*args, **kwargs)
        found_inf = args[1]
        if found_inf.device.type == "meta":
            self._shadows.drop(found_inf)
            self._shadows.set(found_inf, torch.zeros((), dtype=found_inf.dtype), frozenset({NOTE_NO_OVERFLOW}))
        return out

    def _grouped_mm(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return func(*args, **kwargs)
        except RuntimeError:
            mat_a, mat_b = args[0], args[1]
            if mat_a.device.type != "meta":
                raise
            offs = args[2] if len(args) > 2 else kwargs.get("offs")
            out_dtype = (args[4] if len(args) > 4 else kwargs.get("out_dtype")) or mat_a.dtype
            self._note(NOTE_GROUPED_MM)
            return torch.empty(grouped_mm_shape(mat_a, mat_b, offs), dtype=out_dtype, device="meta")

    def _ctc(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """CTC loss: its ``log_alpha`` is ``batch x max(input_lengths) x (2 max(target_lengths) + 1)``,
        a size the length tensors decide (their values when known, else the padded sizes)."""
        if func in (aten._ctc_loss_backward.Tensor, aten._ctc_loss_backward.default):
            log_probs = args[1]
            return torch.empty_like(log_probs)
        log_probs, targets, input_lengths, target_lengths = args[:4]
        time_steps, batch = log_probs.shape[0], log_probs.shape[1] if log_probs.dim() == 3 else 1
        longest_target = targets.shape[-1] if targets.dim() == 2 else targets.numel()
        longest_input = time_steps
        for lengths, which in ((target_lengths, "target"), (input_lengths, "input")):
            known = self._values(lengths) if isinstance(lengths, torch.Tensor) and lengths.device.type == "meta" else None
            on_host = not isinstance(lengths, torch.Tensor) or lengths.device.type != "meta"
            values = known[0] if known is not None else (lengths if on_host else None)
            if values is not None and len(values):
                longest = int(max(values.tolist() if isinstance(values, torch.Tensor) else values))
                if which == "target":
                    longest_target = longest
                else:
                    longest_input = min(longest, time_steps)
        loss = torch.empty((batch,) if log_probs.dim() == 3 else (), dtype=log_probs.dtype, device="meta")
        log_alpha = torch.empty((batch, longest_input, 2 * longest_target + 1), dtype=log_probs.dtype, device="meta")
        return loss, log_alpha

    def _mask_indices(self, indices: Any) -> list[Any]:
        """Boolean masks in an index list become the long indices of their True elements."""
        out: list[Any] = []
        for index in indices:
            if isinstance(index, torch.Tensor) and index.device.type == "meta" and index.dtype in (torch.bool, torch.uint8):
                out.extend(self.run(aten.nonzero.default, (index,), {}).unbind(1))
            else:
                out.append(index)
        return out

    def _assume_selected(self, func: Any, flat: list[Any], spec: Any, metas: list[torch.Tensor]) -> Any:
        """Unknown boolean inputs are all True: run the op on that value when it is small."""
        if not all(t.dtype is torch.bool or self._known(t) for t in metas) or any(t.numel() > SHADOW_LIMIT for t in metas):
            return None
        for t in metas:
            if not self._known(t):
                self._shadows.set(t, torch.ones(t.shape, dtype=torch.bool, device="cpu"), frozenset({NOTE_SELECT_ALL}))
        return self._run_on_values(func, flat, spec, metas)

    def _route(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """Give the indices a router picks the values ``moe_routing`` states."""
        source = args[0]
        if func is aten.topk.default:
            k = args[1]
            dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
        elif func is aten.max.dim:
            k, dim = 1, args[1]
        else:
            k, dim = 1, args[1] if len(args) > 1 else kwargs.get("dim")
            if dim is None:
                return
        indices = out[_ROUTING_INDICES[func]] if isinstance(out, (tuple, list)) else out
        if source.dim() == 0 or indices.numel() > SHADOW_LIMIT or self._known(indices):
            return
        dim = dim % source.dim()
        experts = source.shape[dim]
        if experts == 0 or k > experts:
            return
        moved = list(source.movedim(dim, -1).shape[:-1])
        tokens = math.prod(moved)
        picks = self.routing.assignment(tokens, k, experts).reshape(*moved, k).movedim(-1, dim)
        if indices.dim() < source.dim():  # keepdim=False: the reduced dim is gone
            picks = picks.squeeze(dim)
        if tuple(picks.shape) == tuple(indices.shape):
            self._shadows.set(indices, picks.to(indices.dtype), frozenset({self.routing.describe()}))

    def _note(self, *notes: str) -> None:
        for note in sorted(notes):
            if note not in self._notes:
                self._notes.append(note)


def _cpu_scalars_on_meta(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """Devices accept a 0-dim CPU tensor beside their own as a scalar (TensorIterator); some meta
    kernels refuse it (``masked_fill``'s value). The same op with those scalars on meta, or None
    when the call has no such mix."""
    flat, _ = tree_flatten((args, kwargs))
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    if not any(t.device.type == "meta" for t in tensors) or not any(t.device.type == "cpu" and t.dim() == 0 for t in tensors):
        return None
    return tree_map(
        lambda a: a.to("meta") if isinstance(a, torch.Tensor) and a.device.type == "cpu" and a.dim() == 0 else a, (args, kwargs)
    )


def _on_cpu(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``func`` on value shadows; a few CPU kernels lack the integer dtypes CUDA has."""
    if func is aten.histc.default and not args[0].is_floating_point():
        return func(args[0].double(), *args[1:], **kwargs).to(args[0].dtype)
    return func(*args, **kwargs)


def _has_mask_index(args: tuple[Any, ...]) -> bool:
    return (
        len(args) > 1
        and isinstance(args[1], (list, tuple))
        and any(isinstance(i, torch.Tensor) and i.device.type == "meta" and i.dtype in (torch.bool, torch.uint8) for i in args[1])
    )


def _meta_like(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


def _numel(out: Any) -> int:
    return sum(t.numel() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))


def _unknown_read(tensor: torch.Tensor, scope: Any) -> str:
    return (
        f"the program reads the value of a {str(tensor.dtype).removeprefix('torch.')} tensor "
        f"(.item() / .tolist() / int() / a data-dependent shape) in {scope.module or 'the top level'}, "
        "computed from values a meta tensor does not have (vramsim assumes values only for inputs, "
        "masks, MoE routing and optimizer steps); pass inputs= that avoid it"
    )


def _offloading() -> bool:
    """Whether the copy runs inside ``torch.autograd.graph.save_on_cpu``'s pack hook."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "pack_to_cpu" and code.co_filename.endswith(_SAVE_ON_CPU_FILE):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


_SAVE_ON_CPU_FILE = os.path.join("torch", "autograd", "graph.py")
