"""Fake kernels for data-dependent ops over values nobody knows (assumption 3): the largest size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["FALLBACKS", "grouped_mm_shape"]

aten = torch.ops.aten


def _nonzero(x: torch.Tensor) -> torch.Tensor:
    return torch.empty((x.numel(), x.dim()), dtype=torch.long, device=x.device)


def _masked_select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.empty(torch.broadcast_shapes(x.shape, mask.shape).numel(), dtype=x.dtype, device=x.device)


def _unique2(x: torch.Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False) -> Any:
    n = x.numel()
    return (
        torch.empty(n, dtype=x.dtype, device=x.device),
        torch.empty(x.shape if return_inverse else (0,), dtype=torch.long, device=x.device),
        torch.empty(n if return_counts else 0, dtype=torch.long, device=x.device),
    )


def _unique_consecutive(
    x: torch.Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> Any:
    if dim is not None:
        return _unique_dim(x, dim, True, return_inverse, return_counts)
    return _unique2(x, True, return_inverse, return_counts)


def _unique_dim(x: torch.Tensor, dim: int, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False) -> Any:
    n = x.shape[dim]
    return (
        torch.empty_like(x),
        torch.empty(n if return_inverse else 0, dtype=torch.long, device=x.device),
        torch.empty(n if return_counts else 0, dtype=torch.long, device=x.device),
    )


def _bincount(x: torch.Tensor, weights: torch.Tensor | None = None, minlength: int = 0) -> torch.Tensor:
    dtype = torch.long if weights is None else (weights.dtype if weights.dtype.is_floating_point else torch.double)
    return torch.empty(max(minlength, x.numel()), dtype=dtype, device=x.device)


def _argwhere(x: torch.Tensor) -> torch.Tensor:
    return _nonzero(x)


FALLBACKS: dict[Any, Callable[..., Any]] = {
    aten.nonzero: _nonzero,
    aten.argwhere: _argwhere,
    aten.masked_select: _masked_select,
    aten._unique2: _unique2,
    aten.unique_consecutive: _unique_consecutive,
    aten.unique_dim: _unique_dim,
    aten.bincount: _bincount,
}


def grouped_mm_shape(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor | None) -> tuple[int, ...]:
    """``_create_grouped_mm_output_tensor`` in torch/_meta_registrations.py."""
    groups = offs.shape[0] if offs is not None else None
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return (groups or 1, mat_a.shape[0], mat_b.shape[1])
    if mat_a.dim() == 2:
        return (mat_a.shape[0], mat_b.shape[-1])
    if mat_b.dim() == 2:
        return (mat_a.shape[1], mat_b.shape[1])
    return (mat_a.shape[0], mat_a.shape[1], mat_b.shape[-1])
