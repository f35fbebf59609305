"""torchao's int4 weight-only formats on meta: the default (``Int4Tensor``, plain packing) and tinygemm's.

``TorchAoConfig(Int4WeightOnlyConfig())`` runs torchao's ``Int4Tensor.from_hp``, which quantizes with
the CUDA package mslk (``mslk.quantize.shuffle``): ``int4_row_quantize_zp`` returns the int4 values
in int8 [N, K], float32 scales and zero points [K / group, N] (transposed and made contiguous for
CUTLASS), and ``pack_int4`` packs two values per byte, int8 [N, K / 2]; ``from_hp`` casts the scales
and zero points to the weight's dtype. Every matmul is ``torch.ops.mslk.bf16i4bf16_rowwise``
(mslk's ``bf16i4bf16_dispatch``, a CUTLASS sm90 kernel), which allocates its output Y [M, N] in
bfloat16 and a CUTLASS workspace of ``get_workspace_size``, 0 bytes for its persistent,
non-split-K schedules.

Without mslk, torchao keeps those two helpers as ``None`` and the op does not exist. While a model
is quantized and traced on meta, ``row_quantize_zp`` and ``pack_int4`` below stand for the helpers
(shapes and dtypes only), and ``mslk_int4_gemm_on_meta`` defines the op for the trace (a Meta
kernel making Y) unless mslk is installed; everything else, the tensor subclass and its linear,
is torchao's own code.

``Int4WeightOnlyConfig(int4_packing_format="tile_packed_to_4d")`` (``Int4TilePackedTo4dTensor``) packs
with torch's own ``_convert_weight_to_int4pack`` (its Meta kernel shapes the int32 tiles) and multiplies
with ``aten._weight_int4pack_mm``, whose Meta kernel reads ``fake_device``, an attribute of FakeTensors
only: ``tinygemm_mm_on_meta`` makes what the CUDA kernel makes instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["TINYGEMM_CAPABILITY", "mslk_int4_gemm_on_meta", "pack_int4", "row_quantize_zp", "tinygemm_mm_on_meta"]

TINYGEMM_CAPABILITY = (8, 0)
"""aten/src/ATen/native/cuda/int4mm.cu builds tinygemm for ``__CUDA_ARCH__ >= 800`` (and ROCm's CDNA2+);
``Int4TilePackedTo4dTensor.from_hp`` refuses a GPU below compute capability 8.0."""

_GEMM = "bf16i4bf16_rowwise"


def row_quantize_zp(x: torch.Tensor, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """mslk's ``int4_row_quantize_zp`` on meta: int8 values [N, K]; float32 scales and zeros [K / group, N]."""
    rows, columns = x.shape
    groups = -(-columns // group_size)
    values = torch.empty((rows, columns), dtype=torch.int8, device=x.device)
    return values, x.new_empty((groups, rows), dtype=torch.float32), x.new_empty((groups, rows), dtype=torch.float32)


def pack_int4(x: torch.Tensor) -> torch.Tensor:
    """mslk's ``pack_int4`` on meta: two int4 values per int8 byte along the last dimension."""
    return x.new_empty((x.shape[0], x.shape[1] // 2), dtype=torch.int8)


def _gemm_meta(x: torch.Tensor, w: torch.Tensor, w_scale_group: torch.Tensor, w_zero_group: torch.Tensor) -> torch.Tensor:
    """``bf16i4bf16_dispatch``: ``Y = at::empty({M, N}, bf16)``; the workspace it asks CUTLASS for is empty."""
    rows = x.numel() // x.shape[-1]
    return x.new_empty((rows, w.shape[0]), dtype=torch.bfloat16)


@contextlib.contextmanager
def mslk_int4_gemm_on_meta() -> Iterator[None]:
    """Define ``mslk::bf16i4bf16_rowwise`` with a Meta kernel for the trace, and remove it afterwards
    (``Library._destroy`` also drops ``torch.ops.mslk``'s cached packet); mslk's own, where installed, stays."""
    if hasattr(torch.ops.mslk, _GEMM):
        yield
        return
    library = torch.library.Library("mslk", "FRAGMENT")
    try:
        library.define(f"{_GEMM}(Tensor X, Tensor W, Tensor w_scale_group, Tensor w_zero_group) -> Tensor")
        library.impl(_GEMM, _gemm_meta, "Meta")
        yield
    finally:
        library._destroy()


def tinygemm_mm_on_meta(a: torch.Tensor, b: torch.Tensor, group_size: int, scale_and_zero: torch.Tensor) -> torch.Tensor:
    """aten/src/ATen/native/cuda/int4mm.cu ``_weight_int4pack_mm_cuda``: ``C_final = at::empty({m, n}, bf16)`` with
    n = ``B.size(0)`` x 8 (CUDA's n-tiles of 8; ROCm's of 16 over half as many rows), and no other buffer."""
    return a.new_empty((a.shape[0], b.shape[0] * 8), dtype=torch.bfloat16)
