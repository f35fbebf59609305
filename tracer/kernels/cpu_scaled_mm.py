"""The scratch of ``torch._scaled_mm`` on the CPU (float8 matmuls: torchao's float8 linears), from its source.

aten/src/ATen/native/Blas.cpp ``_scaled_mm_out_cpu`` runs oneDNN only where mkldnn is enabled and
the CPU has AMX-INT8 (``cpuinfo_has_x86_amx_int8``); elsewhere ``_scaled_mm_out_cpu_emulated``
computes in float32 with ``at::`` calls that meta execution never makes. After resizing the output
it holds, in this order (A [M, K], B [K, N], both float8):

- ``mat_b.contiguous()``: B copied when it is not contiguous (a linear's weight arrives transposed);
- ``fp32_mat_a = at::mul(mat_a.to(kFloat), scale_a)``: the float32 copy and the product, 4MK each,
  the copy freed after the product; then the same for B, 4KN each;
- ``out_tmp = at::matmul(fp32_mat_a, fp32_mat_b)``, float32 [M, N], then ``out_tmp.to(out_dtype)``
  (a new tensor unless the output is float32), copied into the output.

The rule returns the most of that alive at once, as one buffer beside the output.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["scaled_mm_workspaces"]

_SCALED_MM = torch.ops.aten._scaled_mm.default


def scaled_mm_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """``_scaled_mm_out_cpu_emulated``'s float32 copies, on a host without AMX-INT8 (else not modelled)."""
    if func is not _SCALED_MM or _amx_int8():
        return []
    a, b = args[0], args[1]
    rows, inner, columns = a.shape[0], a.shape[1], b.shape[1]
    if rows * inner * columns == 0:
        return []
    out_dtype = kwargs.get("out_dtype", args[6] if len(args) > 6 else None) or a.dtype
    copies = (0 if a.is_contiguous() else rows * inner) + (0 if b.is_contiguous() else inner * columns)
    a32, b32, out32 = 4 * rows * inner, 4 * inner * columns, 4 * rows * columns
    cast = 0 if out_dtype == torch.float32 else rows * columns * torch.empty((), dtype=out_dtype).element_size()
    return [copies + a32 + max(a32, 2 * b32, b32 + out32 + cast)]


def _amx_int8() -> bool:
    mkldnn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    return bool(mkldnn and torch._C._cpu._get_cpu_capability().get("amx_int8"))
