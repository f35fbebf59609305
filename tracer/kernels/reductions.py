"""The input copy a reduction makes when it accumulates in a dtype other than its input's.

aten/src/ATen/native/ReduceOpsUtils.h ``make_reduction_from_out_ty`` -> ``make_reduction``: when
the input's dtype differs from the dtype the reduction computes in, the iterator reads
``self.to(in_dtype)``, a full-size copy freed when the op returns. ``in_dtype`` is the output's
dtype (a bool mask's ``sum`` gives int64, ``sum(dtype=torch.float64)``), except on CUDA from
half / bf16 to float (``gpu_lowp_to_f32``), where the kernel reads its input as it is. Meta
kernels allocate the output only.

Users in aten/src/ATen/native/ReduceOps.cpp: ``sum_out`` (``sum``, ``sum.dim_IntList``),
``nansum_out``, and ``mean_out`` off the CPU. On the CPU, ``mean_out`` of a half / bf16 result
computes in float instead: it sums into a float result (copying the input to float) and converts
back, so the op holds the float input copy and the float result beside its half output.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..mode import WorkspaceRule

__all__ = ["reduction_copies"]

aten = torch.ops.aten
_SUMS = frozenset({aten.sum.default, aten.sum.dim_IntList, aten.nansum.default})
_MEANS = frozenset({aten.mean.default, aten.mean.dim})
_HALF = (torch.float16, torch.bfloat16)


def reduction_copies(*, cuda: bool) -> WorkspaceRule:
    """The workspace rule for the CPU (``cuda=False``) or CUDA/ROCm targets."""

    def workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
        if func not in _SUMS and func not in _MEANS:
            return []
        x: torch.Tensor = args[0]
        integral = not (x.is_floating_point() or x.is_complex())
        out_dtype = kwargs.get("dtype") or (torch.int64 if func in _SUMS and integral else x.dtype)
        if func in _MEANS and not cuda and out_dtype in _HALF:
            out_numel = x.numel() // max(_reduced_numel(x, args[1] if len(args) > 1 else None), 1)
            copy = x.numel() * 4 if x.dtype != torch.float32 else 0
            return [copy + out_numel * 4]
        gpu_lowp_to_f32 = cuda and x.dtype in _HALF and out_dtype == torch.float32
        if out_dtype == x.dtype or gpu_lowp_to_f32:
            return []
        return [x.numel() * out_dtype.itemsize]

    return workspaces


def _reduced_numel(x: torch.Tensor, dims: Any) -> int:
    """Elements folded into each output element (all of them for no or empty ``dims``)."""
    if not dims:
        return x.numel()
    dims = [dims] if isinstance(dims, int) else dims
    return math.prod(x.shape[d] for d in dims)
