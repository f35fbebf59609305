"""bitsandbytes' 4-bit matmul as each target runs it.

``bitsandbytes::gemm_4bit`` is one op at dispatch, and its meta kernel allocates only the output;
the implementation each device registers behind it allocates more, and differs by device:

- CPU registers none of its own, so the ``default`` backend runs (``backends/default/ops.py``
  ``_gemm_4bit_default_impl``): the nested absmax dequantized and offset, the whole weight
  dequantized to the input's dtype, then ``F.linear``.
- CUDA (``backends/cuda/ops.py``) runs its fused kernel, which allocates only the output, for
  ``M <= 4`` rows on every architecture; above that a per-architecture heuristic (SM count, compute
  capability and shape) may choose ``_dequant_linear_fallback``, and past ``M = 1536`` always does:
  absmax dequantized into a float32 buffer plus the offset, the weight dequantized to the input's
  dtype, then ``F.linear``. The heuristic's middle range is not modelled: the fallback, the larger of
  the two, is assumed there (``NOTE_GEMM_4BIT``).

Running the composite on meta tensors lets the tracer see each buffer as the device allocates it.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["NOTE_GEMM_4BIT", "bitsandbytes_functions"]

CUDA_FUSED_MAX_ROWS = 4
"""``_GEMM_4BIT_CUSTOM_FLOOR_M``: at or below it every CUDA architecture runs the fused kernel."""
NOTE_GEMM_4BIT = (
    "bitsandbytes 4-bit matmuls of more than 4 rows dequantize the whole weight before F.linear (the "
    "unfused path, taken past 1536 rows; between, bitsandbytes' per-GPU heuristic may fuse instead)"
)


def bitsandbytes_functions(*, cuda: bool) -> dict[Callable[..., Any], Callable[..., Any]]:
    """``KernelRules.functions`` entries for bitsandbytes' ops on a CUDA or CPU target; none where
    bitsandbytes is not installed (no model can then hold its layers)."""
    if importlib.util.find_spec("bitsandbytes") is None:
        return {}
    # The CPU backend logs a warning on import when the optional `kernels` package is missing; it
    # concerns CPU inference speed, not what vramsim simulates.
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    import bitsandbytes  # noqa: F401  (registers torch.ops.bitsandbytes)

    gemm_4bit = torch.ops.bitsandbytes.gemm_4bit.default
    return {gemm_4bit: _cuda_gemm_4bit(gemm_4bit) if cuda else _dequantize_and_linear}


def _dequantize_and_linear(
    A: torch.Tensor, B: torch.Tensor, shapeB: list[int], absmax: torch.Tensor, blocksize: int, quant_type: str,
    bias: torch.Tensor | None = None, absmax_8bit: torch.Tensor | None = None,
    absmax_code: torch.Tensor | None = None, absmax_offset: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """The unfused path (CPU's default backend, CUDA's fallback): the nested absmax dequantized and
    offset, the weight dequantized in the input's dtype, then ``F.linear``."""
    ops = torch.ops.bitsandbytes
    if absmax_8bit is not None:
        absmax = ops.dequantize_blockwise.default(absmax_8bit, absmax, absmax_code, 256, torch.float32) + absmax_offset
    weight = ops.dequantize_4bit.default(B, absmax, blocksize, quant_type, shapeB, A.dtype)
    return F.linear(A, weight, bias)


def _cuda_gemm_4bit(fused: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def gemm_4bit(A: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        rows = A.numel() // A.shape[-1]
        if rows <= CUDA_FUSED_MAX_ROWS:
            return fused(A.contiguous(), *args, **kwargs)
        return _dequantize_and_linear(A, *args, **kwargs)

    return gemm_4bit
