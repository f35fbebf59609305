"""bitsandbytes' 4-bit and LLM.int8 matmuls as each target runs them.

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

LLM.int8 (``MatMul8bitLt``) calls three ops whose meta kernels allocate only their outputs; on
CUDA, ``int8_vectorwise_quant`` is CUDA's composite (``backends/cuda/ops.py``: the input's absolute
values and their outlier mask beside the int8 rows and their scales) and ``int8_mixed_scaled_mm`` /
``int8_scaled_mm`` / ``int8_vectorwise_dequant`` are the ``default`` backend's composites over
CUDA's int8 GEMM (an int32 result) and its dequantization (fp16, then the input's dtype). Which
columns hold outliers is a fact of the data; ``LLM_INT8_OUTLIER_COLUMNS`` is assumed.

Running the composites on meta tensors lets the tracer see each buffer as the device allocates it.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["LLM_INT8_OUTLIER_COLUMNS", "NOTE_GEMM_4BIT", "NOTE_LLM_INT8", "WithBitsandbytes", "bitsandbytes_functions"]

CUDA_FUSED_MAX_ROWS = 4
"""``_GEMM_4BIT_CUSTOM_FLOOR_M``: at or below it every CUDA architecture runs the fused kernel."""
NOTE_GEMM_4BIT = (
    "bitsandbytes 4-bit matmuls of more than 4 rows dequantize the whole weight before F.linear (the "
    "unfused path, taken past 1536 rows; between, bitsandbytes' per-GPU heuristic may fuse instead)"
)
LLM_INT8_OUTLIER_COLUMNS = 6
"""Input columns of each LLM.int8 matmul with a value past the outlier threshold: Dettmers et al.,
"LLM.int8()" (2022), section 4.1: in transformers of 6.7B parameters and more, outliers occupy up to
6 feature dimensions of a layer's input (fewer in smaller models)."""
NOTE_LLM_INT8 = (
    f"LLM.int8 matmuls find {LLM_INT8_OUTLIER_COLUMNS} outlier input columns each (Dettmers et al. 2022, up to 6 "
    "feature dimensions from 6.7B parameters on), kept in 16 bits beside the int8 product"
)


class WithBitsandbytes(Mapping[Callable[..., Any], Callable[..., Any]]):
    """``functions`` and, once bitsandbytes is imported, ``bitsandbytes_functions``: its ops exist only once
    it is (importing it registers them), so a program that has not imported it (a model of bitsandbytes
    layers, or its 8-bit optimizer, does) calls none of them, and a run without it does not pay its import
    (about a second of CPU: it sets up ``torch.compile``'d kernels). ``KernelEmulation`` asks ``get`` per
    call."""

    def __init__(self, functions: Mapping[Callable[..., Any], Callable[..., Any]], *, cuda: bool) -> None:
        self._functions = dict(functions)
        self._cuda = cuda
        self._joined: dict[Callable[..., Any], Callable[..., Any]] | None = None
        _quiet_bitsandbytes()

    def joined(self, functions: Mapping[Callable[..., Any], Callable[..., Any]]) -> WithBitsandbytes:
        """These entries and ``functions`` (``functions`` winning), bitsandbytes' still added once imported."""
        return WithBitsandbytes({**self._functions, **functions}, cuda=self._cuda)

    def _table(self) -> Mapping[Callable[..., Any], Callable[..., Any]]:
        if self._joined is not None:
            return self._joined
        if "bitsandbytes" not in sys.modules:
            return self._functions
        try:
            self._joined = {**bitsandbytes_functions(cuda=self._cuda), **self._functions}
        except AttributeError:  # asked while bitsandbytes is being imported: its ops are not all registered yet
            return self._functions
        return self._joined

    def get(self, key: Any, default: Any = None) -> Any:
        return self._table().get(key, default)

    def __getitem__(self, key: Callable[..., Any]) -> Callable[..., Any]:
        return self._table()[key]

    def __iter__(self) -> Iterator[Callable[..., Any]]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def _quiet_bitsandbytes() -> None:
    """The CPU backend logs a warning on import when the optional `kernels` package is missing (CPU
    inference speed), and LLM.int8 one per matmul whose input is not fp16 (the cast is traced)."""
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    logging.getLogger("bitsandbytes.autograd._functions").setLevel(logging.ERROR)


def bitsandbytes_functions(*, cuda: bool) -> dict[Callable[..., Any], Callable[..., Any]]:
    """``KernelRules.functions`` entries for bitsandbytes' ops on a CUDA or CPU target; none where
    bitsandbytes is not installed (no model can then hold its layers)."""
    if importlib.util.find_spec("bitsandbytes") is None:
        return {}
    _quiet_bitsandbytes()
    import bitsandbytes  # noqa: F401  (registers torch.ops.bitsandbytes)

    ops = torch.ops.bitsandbytes
    gemm_4bit = ops.gemm_4bit.default
    if not cuda:
        return {gemm_4bit: _dequantize_and_linear}
    by_op: dict[Any, Callable[..., Any]] = {
        ops.gemm_4bit: _cuda_gemm_4bit(gemm_4bit),
        ops.int8_vectorwise_quant: _cuda_int8_vectorwise_quant,
        ops.int8_mixed_scaled_mm: _int8_mixed_scaled_mm,
        ops.int8_scaled_mm: _int8_scaled_mm,
        ops.int8_vectorwise_dequant: _int8_vectorwise_dequant,
    }
    # bitsandbytes calls some through the op (``ops.x(...)``), some through its overload (``ops.x.default(...)``)
    return {key: function for op, function in by_op.items() for key in (op, op.default)}


def _dequantize_and_linear(
    A: torch.Tensor,
    B: torch.Tensor,
    shapeB: list[int],
    absmax: torch.Tensor,
    blocksize: int,
    quant_type: str,
    bias: torch.Tensor | None = None,
    absmax_8bit: torch.Tensor | None = None,
    absmax_code: torch.Tensor | None = None,
    absmax_offset: torch.Tensor | None = None,
) -> torch.Tensor:
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


def _cuda_int8_vectorwise_quant(A: torch.Tensor, threshold: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """CUDA's: int8 rows and float32 row scales; past a threshold, ``A.abs() >= threshold`` marks
    outliers, whose columns (``argwhere``, ``LLM_INT8_OUTLIER_COLUMNS`` of them) are zeroed in the rows."""
    rows = A.numel() // A.shape[-1]
    row_stats = torch.empty(rows, device=A.device, dtype=torch.float32)
    out_row = torch.empty(A.shape, device=A.device, dtype=torch.int8)
    outlier_cols = None
    if threshold > 0.0:
        outliers = A.abs() >= threshold
        outliers.any()  # read by the host: are there any
        outliers.any(dim=0)  # the columns argwhere searches
        columns = min(A.shape[-1], LLM_INT8_OUTLIER_COLUMNS)
        outlier_cols = torch.arange(columns, device=A.device)  # argwhere's result, positions assumed
    if rows > 1 and outlier_cols is not None:
        out_row[:, outlier_cols] = 0
    return out_row, row_stats, outlier_cols


def _int8_mixed_scaled_mm(
    A: torch.Tensor,
    CA: torch.Tensor,
    CB: torch.Tensor,
    SCA: torch.Tensor,
    SCB: torch.Tensor,
    outlier_cols: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The default backend's: the outlier columns' inputs and dequantized weights in 16 bits, added
    to the int8 product."""
    sub_b = None
    if outlier_cols is not None and outlier_cols.numel():
        sub_a = A[:, outlier_cols].contiguous()
        sub_b = torch.ops.bitsandbytes.int8_vectorwise_dequant.default(CB[:, outlier_cols].contiguous(), SCB)
        sub_b = sub_b.to(A.dtype).t()
    else:
        sub_a = torch.empty(0, device=A.device, dtype=A.dtype)
    output = _int8_scaled_mm(CA, CB, SCA, SCB, bias=bias, dtype=A.dtype)
    if sub_b is not None:
        output = output.addmm(sub_a, sub_b)
    return output, sub_a


def _int8_scaled_mm(
    A: torch.Tensor,
    B: torch.Tensor,
    row_stats: torch.Tensor,
    col_stats: torch.Tensor,
    bias: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The default backend's over CUDA's kernels: cuBLASLt's int32 product, dequantized to fp16 (the
    kernel's only output dtype), a bias not in fp16 added after, then cast to ``dtype``."""
    product = torch.ops.bitsandbytes.int8_linear_matmul.default(A, B)
    out = torch.empty_like(product, dtype=torch.float16)
    if bias is not None and bias.dtype != torch.float16:
        out.add_(bias)
    result = out.to(dtype or torch.float16)
    del product
    return result


def _int8_vectorwise_dequant(A: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
    """The default backend's (CUDA registers none): int8 times the row scales, in float32."""
    return A * stats.view(-1, 1) * 7.874015718698502e-3
