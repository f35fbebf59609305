"""The strides PyTorch's CPU kernels give the outputs they allocate, where meta execution differs.

Most meta kernels are Python registrations (torch/_meta_registrations.py, torch/_refs) that
replace the C++ structured meta functions. Their layout rules are close to the CPU kernels' but
not identical, and a layout decides later copies: ``suggest_memory_format`` of a tensor picks
whether group_norm or a convolution works channels-last or makes a contiguous copy. The rules
below restride meta outputs as the CPU kernel would have allocated them (same bytes, other
strides), each following the cited C++ (PyTorch 2.13).

Rules (``cpu_output_layouts``):
    pointwise ops            aten/src/ATen/TensorIterator.cpp: fast setup, else the stride sort
                             of ``reorder_dimensions`` and ``allocate_or_resize_outputs``.
    ``*_like`` factories     aten/src/ATen/native/TensorFactories.cpp ``empty_like``.
    native_group_norm (+bw)  aten/src/ATen/native/group_norm.cpp: ``empty_like(X.contiguous(
                             X.suggest_memory_format()))`` on CPU.
    convolution (+bw)        aten/src/ATen/native/Convolution.cpp ``determine_backend_memory_format``.

``cpu_group_norm`` replaces ``F.group_norm``: its C++ composite (group_norm.cpp ``group_norm``)
and its derivative keep a channels-last input as is on CPU but make it contiguous on any other
device, meta included.

Known limitations: only functional (non-mutating) overloads are restrided; ops whose CPU kernel
is not TensorIterator-based keep the meta kernel's strides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from .cpu_kernels import conv_backend

__all__ = [
    "CPU_FUNCTIONS",
    "cpu_group_norm",
    "cpu_output_layouts",
    "non_overlapping_and_dense",
    "suggest_memory_format",
    "tensor_iterator_strides",
]

_Strides = tuple[int, ...]


# -- c10 layout predicates ----------------------------------------------------------------------


def non_overlapping_and_dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """c10/core/TensorImpl.cpp ``compute_non_overlapping_and_dense``."""
    if len(sizes) == 1:
        return sizes[0] < 2 or strides[0] == 1
    perm = sorted(range(len(sizes)), key=lambda d: (sizes[d] < 2, strides[d] if sizes[d] >= 2 else 0))
    required = 1
    for d in perm:
        if sizes[d] < 2:
            return True
        if strides[d] != required:
            return False
        required *= sizes[d]
    return True


def _strides_like_channels_last(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """c10/core/MemoryFormat.h ``is_channels_last_strides_2d_s4`` / ``_3d_s5``."""
    order: tuple[int, ...]
    if len(sizes) == 4:
        order = (1, 3, 2, 0)
    elif len(sizes) == 5:
        order = (1, 4, 3, 2, 0)
    else:
        return False
    if strides[1] == 0:
        return False
    lowest = 0
    for d in order:
        if sizes[d] == 0 or strides[d] < lowest:
            return False
        if d == 0 and lowest == strides[1]:
            return False
        lowest = strides[d] * (sizes[d] if sizes[d] > 1 else 1)
    return True


def suggest_memory_format(t: torch.Tensor) -> torch.memory_format:
    """c10/core/TensorImpl.h ``TensorBase::suggest_memory_format`` (no exact match)."""
    if t.layout is torch.strided and _strides_like_channels_last(t.shape, t.stride()):
        return torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _contiguous_strides(sizes: Sequence[int], memory_format: torch.memory_format) -> _Strides:
    """``empty(sizes, memory_format=...)`` strides (c10/core/MemoryFormat.h ``get_channels_last_strides_*``)."""
    order: tuple[int, ...]
    if memory_format is torch.channels_last and len(sizes) == 4:
        order, floor = (1, 3, 2, 0), 0
    elif memory_format is torch.channels_last_3d and len(sizes) == 5:
        order, floor = (1, 4, 3, 2, 0), 0
    else:  # c10 contiguous_strides clamps sizes at 1
        order, floor = tuple(range(len(sizes) - 1, -1, -1)), 1
    strides = [0] * len(sizes)
    step = 1
    for d in order:
        strides[d] = step
        step *= max(sizes[d], floor)
    return tuple(strides)


# -- TensorIterator -----------------------------------------------------------------------------


def tensor_iterator_strides(operands: Sequence[torch.Tensor]) -> tuple[tuple[int, ...], _Strides]:
    """Shape and strides of the output TensorIterator allocates for ``operands`` (its inputs, in
    the order the kernel adds them; a 0-dim tensor stands for a wrapped scalar).

    TensorIterator.cpp ``build``: ``compute_shape``; ``fast_set_up`` when all operands have one
    shape and are all contiguous, all channels-last, or all non-overlapping-and-dense with equal
    strides; otherwise ``compute_strides`` (broadcast dims get stride 0), ``reorder_dimensions``
    (insertion sort by the first operand whose strides decide, ties broken by size) and
    ``allocate_or_resize_outputs`` (dense strides in the sorted order).
    """
    shape: tuple[int, ...] = ()
    same_shape, has_scalars, has_tensors = True, False, False
    for i, t in enumerate(operands):
        has_scalars |= t.dim() == 0
        has_tensors |= t.dim() > 0
        if has_scalars and has_tensors:
            same_shape = False
        if i == 0:
            shape = tuple(t.shape)
        elif tuple(t.shape) != shape:
            same_shape = False
            shape = tuple(torch.broadcast_shapes(shape, t.shape))
    if same_shape:
        if all(t.is_contiguous() for t in operands):
            return shape, _contiguous_strides(shape, torch.contiguous_format)
        if all(t.is_contiguous(memory_format=torch.channels_last) for t in operands):
            return shape, _contiguous_strides(shape, torch.channels_last)
        common = operands[-1].stride()
        if all(non_overlapping_and_dense(t.shape, t.stride()) and t.stride() == common for t in operands):
            return shape, tuple(common)
    ndim = len(shape)
    stride_bytes = [_broadcast_stride_bytes(t, shape) for t in operands]
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = _should_swap(stride_bytes, shape, perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    strides = [0] * ndim
    step = 1
    for d in perm:  # compatible_stride over the permuted shape, then invert_perm
        strides[d] = step
        step *= shape[d]
    return shape, tuple(strides)


def _broadcast_stride_bytes(t: torch.Tensor, shape: tuple[int, ...]) -> list[int]:
    offset = len(shape) - t.dim()
    out = [0] * len(shape)
    for i, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        out[offset + i] = 0 if size == 1 and shape[offset + i] != 1 else stride * t.element_size()
    return out


def _should_swap(stride_bytes: list[list[int]], shape: tuple[int, ...], dim0: int, dim1: int) -> int:
    """``reorder_dimensions``' comparator: 1 if dim0 goes after dim1, -1 if before, 0 if undecided."""
    for strides in stride_bytes:
        s0, s1 = strides[dim0], strides[dim1]
        if s0 == 0 or s1 == 0:
            continue
        if s0 != s1:
            return -1 if s0 < s1 else 1
        if shape[dim0] > shape[dim1]:
            return 1
    return 0


def _operands(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor] | None:
    """TensorIterator inputs of a pointwise op, in schema order: tensors, numbers passed for a
    Tensor parameter (wrapped scalars), and the ``other`` Scalar of a ``.Scalar`` overload, which
    BinaryOps.cpp forwards to the Tensor overload as ``wrapped_scalar_tensor(other)``."""
    operands: list[torch.Tensor] = []
    scalar_overload = func._overloadname == "Scalar" or func._overloadname.startswith("Scalar_")
    for i, arg in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        if isinstance(value, torch.Tensor):
            operands.append(value)
        elif isinstance(value, (int, float, bool, complex)) and (
            isinstance(arg.type, torch.TensorType) or (scalar_overload and arg.name == "other")
        ):
            operands.append(torch.empty((), device="meta"))
    return operands or None


# -- the rule -----------------------------------------------------------------------------------

_LIKE = {
    torch.ops.aten.empty_like.default, torch.ops.aten.zeros_like.default, torch.ops.aten.ones_like.default,
    torch.ops.aten.full_like.default, torch.ops.aten.rand_like.default, torch.ops.aten.randn_like.default,
}  # fmt: skip
_GROUP_NORM = torch.ops.aten.native_group_norm.default
_GROUP_NORM_BACKWARD = torch.ops.aten.native_group_norm_backward.default
_CONV = torch.ops.aten.convolution.default
_CONV_BACKWARD = torch.ops.aten.convolution_backward.default
_C_META = {torch.ops.aten.clone.default}
"""Pointwise-tagged ops whose meta kernel stays the C++ one (``activate_meta`` skips them), whose
strides already match the CPU's."""


def cpu_output_layouts(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
    """``out`` with each fresh output restrided as the CPU kernel allocates it."""
    if func in _LIKE:
        return _restride(out, _empty_like_strides(args[0], kwargs.get("memory_format")))
    if func is _GROUP_NORM:
        return (_restride(out[0], _empty_like_strides(_contiguous_as(args[0]), None)), *out[1:])
    if func is _GROUP_NORM_BACKWARD:
        return (_restride(out[0], _empty_like_strides(_contiguous_as(args[1]), None)), *out[1:])
    if func is _CONV or func is _CONV_BACKWARD:
        return _conv_layouts(func, args, out)
    if torch.Tag.pointwise in func.tags and func not in _C_META and not func._schema.is_mutable and isinstance(out, torch.Tensor):
        operands = _operands(func, args, kwargs)
        if operands is None:
            return out
        shape, strides = tensor_iterator_strides(operands)
        return _restride(out, strides) if tuple(out.shape) == shape else out
    return out


def _restride(t: torch.Tensor | None, strides: _Strides | None) -> torch.Tensor | None:
    if t is None or strides is None or t.device.type != "meta" or t.stride() == strides:
        return t
    return torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)


def _empty_like_strides(t: torch.Tensor, memory_format: torch.memory_format | None) -> _Strides:
    """TensorFactories.cpp ``empty_like``: preserve keeps a dense input's strides, else follows
    the input's layout order (``infer_dense_strides``, TensorIterator's sort)."""
    if memory_format not in (None, torch.preserve_format):
        return _contiguous_strides(t.shape, memory_format)
    if non_overlapping_and_dense(t.shape, t.stride()):
        return tuple(t.stride())
    return tensor_iterator_strides([t, torch.empty((), device="meta")])[1]


def _contiguous_as(t: torch.Tensor) -> torch.Tensor:
    """``X.contiguous(X.suggest_memory_format())``'s strides, as a stand-in with no storage."""
    memory_format = suggest_memory_format(t)
    if t.is_contiguous(memory_format=memory_format):
        return t
    return torch.empty_strided(t.shape, _contiguous_strides(t.shape, memory_format), dtype=t.dtype, device="meta")


def _conv_layouts(func: Any, args: tuple[Any, ...], out: Any) -> Any:
    """Convolution.cpp ``_convolution`` / ``convolution_backward``: outputs (grad_input and
    grad_weight in backward) in ``determine_backend_memory_format(input, weight, backend)``."""
    forward = func is _CONV
    x, weight = (args[0], args[1]) if forward else (args[1], args[2])
    params = args[3:9] if forward else args[4:10]
    backend = conv_backend(x, weight, *params)
    if backend == torch._C._ConvBackend.Slow2d:  # type: ignore[attr-defined]  # torch's stub spells it ConvBackend
        # ConvUtils.h thnn_conv_use_channels_last: input or weight channels-last, on the CPU.
        cl = torch.channels_last in (suggest_memory_format(x), suggest_memory_format(weight))
        memory_format = torch.channels_last if cl else torch.contiguous_format
    else:
        memory_format = torch._C._conv_determine_backend_memory_format(x, weight, backend)
    if forward:
        return _restride(out, _contiguous_strides(out.shape, memory_format))
    grads = [_restride(g, _contiguous_strides(g.shape, memory_format)) if g is not None else None for g in out[:2]]
    return (*grads, out[2])


# -- group_norm's composite ---------------------------------------------------------------------


def cpu_group_norm(
    input: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = False,
) -> torch.Tensor:
    """group_norm.cpp ``group_norm`` as it runs on CPU: ``input.contiguous(suggest_memory_format)``
    (meta takes the ``input.contiguous()`` branch), then ``native_group_norm``."""
    x = input.contiguous(memory_format=suggest_memory_format(input))
    gamma = weight.contiguous() if weight is not None else None
    beta = bias.contiguous() if bias is not None else None
    return _NativeGroupNorm.apply(x, gamma, beta, num_groups, eps)


class _NativeGroupNorm(torch.autograd.Function):
    """``native_group_norm`` with the CPU branch of its derivative (tools/autograd/derivatives.yaml):
    ``grad`` and ``input`` go to ``native_group_norm_backward`` as ``contiguous(input.
    suggest_memory_format())`` on CPU, plain ``contiguous()`` elsewhere. It saves what
    ``NativeGroupNormBackward0`` saves: input, weight, mean and rstd."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, gamma: torch.Tensor | None, beta: torch.Tensor | None, groups: int, eps: float
    ) -> torch.Tensor:
        n, c, hxw = x.shape[0], x.shape[1], math.prod(x.shape[2:])
        y, mean, rstd = torch.native_group_norm(x, gamma, beta, n, c, hxw, groups, eps)
        ctx.save_for_backward(x, gamma, mean, rstd)
        ctx.groups = groups
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, gamma, mean, rstd = ctx.saved_tensors
        memory_format = suggest_memory_format(x)
        mask = list(ctx.needs_input_grad[:3])
        n, c, hxw = x.shape[0], x.shape[1], math.prod(x.shape[2:])
        grads = torch.ops.aten.native_group_norm_backward(
            grad.contiguous(memory_format=memory_format),
            x.contiguous(memory_format=memory_format),
            mean,
            rstd,
            gamma,
            n,
            c,
            hxw,
            ctx.groups,
            mask,
        )
        return (*grads, None, None)


CPU_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {F.group_norm: cpu_group_norm, torch.group_norm: cpu_group_norm}
"""Python-level functions whose CPU composite differs from the one meta tensors take."""
