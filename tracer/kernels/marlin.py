"""gptqmodel's Marlin GEMM (GPTQ and AWQ weights on CUDA) as one op, and the scratch its kernel allocates.

transformers loads GPTQ (through optimum) and AWQ checkpoints with gptqmodel's layers, and on an
NVIDIA GPU its automatic kernel choice (``utils/importer.py select_quant_linear``, highest
``SUPPORTS_FORMATS`` priority first) is Marlin for both: ``MarlinLinear`` (GPTQ, priority 90:
symmetric, 4 or 8 bits, groups of -1/32/64/128, sm 7.5+) and ``AwqMarlinLinear`` (AWQ ``gemm``
format, priority 90, sm 8.0+). Both call ``gptq_marlin_gemm`` (``gptqmodel_ext/marlin/gptq_marlin.cu``),
which allocates, besides its output ``c`` [M, N] in the input's dtype:

- ``c_tmp``, the fp32 global-reduce buffer, when ``use_fp32_reduce`` (on by default:
  ``GPTQMODEL_MARLIN_USE_FP32``, ``apply_awq_marlin_linear``): ``sms * min(ceil16(M), 64) *
  max_thread_n`` floats, ``max_thread_n = 256`` (``marlin.cuh``);
- ``a_tmp`` [M, K] in the input's dtype, the input permuted by act order, only with ``desc_act``.

``vramsim::marlin_gemm`` stands for that call on meta: its fake kernel makes the output, and
``marlin_workspaces`` reports the scratch, which lives inside the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["MARLIN_FP32_REDUCE", "MARLIN_MAX_THREAD_N", "marlin_workspaces"]

MARLIN_MAX_THREAD_N = 256
"""``marlin::max_thread_n`` (``gptqmodel_ext/marlin/marlin.cuh``): the widest tile, sizing ``c_tmp``."""
MARLIN_FP32_REDUCE = True
"""``GPTQMODEL_MARLIN_USE_FP32`` defaults on (``MarlinLinear.__init__``); AWQ's call passes True."""


@torch.library.custom_op("vramsim::marlin_gemm", mutates_args=())
def marlin_gemm(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, workspace: torch.Tensor, size_n: int, act_order: bool
) -> torch.Tensor:
    """``gptq_marlin_gemm(a, ...)`` for a 2-D input: [M, K] -> [M, N]; the bias is added in its epilogue."""
    raise NotImplementedError("vramsim::marlin_gemm stands for gptqmodel's CUDA kernel and runs on meta only")


@marlin_gemm.register_fake
def _marlin_gemm_fake(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, workspace: torch.Tensor, size_n: int, act_order: bool
) -> torch.Tensor:
    return x.new_empty(x.shape[0], size_n)  # c = torch::empty({size_m, size_n}, options)


def marlin_workspaces(sms: int) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], list[int]]:
    """``KernelRules.workspaces`` for ``vramsim::marlin_gemm`` on a GPU of ``sms`` multiprocessors:
    ``c_tmp`` and (act order) ``a_tmp``, alive together inside the call, as one buffer."""
    op = torch.ops.vramsim.marlin_gemm.default

    def workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
        if func is not op:
            return []
        x, act_order = args[0], args[5]
        rows, k = x.shape
        c_tmp = sms * min(-(-rows // 16) * 16, 64) * MARLIN_MAX_THREAD_N * 4 if MARLIN_FP32_REDUCE else 0
        a_tmp = rows * k * x.element_size() if act_order else 0
        return [c_tmp + a_tmp] if rows else []

    return workspaces
