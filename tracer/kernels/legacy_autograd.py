"""Autograd formulas of PyTorch before 1.11 that kept more tensors for backward than today's.

Through PyTorch 1.10, tools/autograd/derivatives.yaml differentiated ``_softmax`` and ``_log_softmax``
with ``_softmax_backward_data(grad, result, dim, self)`` (and the log form alike): the backward took
the input tensor itself, only to read its dtype, so autograd saved the input beside the output. PyTorch
1.11 passes ``self.scalar_type()`` instead and saves the output alone. On an attention layer the input
is the masked score matrix, one more (batch, heads, seq, seq) tensor held per layer until backward.

``legacy_softmax_functions`` replaces ``softmax`` and ``log_softmax`` with an autograd function that
saves both, as 1.10 did, and computes with today's kernels (which need only the output). The cast
follows ATen's ``softmax.int``: on CUDA a float16 input asked for float32 runs ``_softmax(input, dim,
half_to_float=True)`` with no cast (the input saved is the float16 one); otherwise the input is cast
first and the cast is what is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["legacy_softmax_functions"]


class _SavingInput(torch.autograd.Function):
    """``_softmax`` / ``_log_softmax`` with 1.10's saved set: input and result."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, dim: int, half_to_float: bool, log: bool) -> torch.Tensor:
        result = (torch._log_softmax if log else torch._softmax)(input, dim, half_to_float)
        ctx.save_for_backward(input, result)
        ctx.dim, ctx.log = dim, log
        return result

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        input, result = ctx.saved_tensors
        backward = torch._log_softmax_backward_data if ctx.log else torch._softmax_backward_data
        return backward(grad, result, ctx.dim, input.dtype), None, None, None


def _softmax(*, cuda: bool, log: bool) -> Callable[..., torch.Tensor]:
    def run(input: torch.Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: torch.dtype | None = None) -> torch.Tensor:
        if dim is None:  # the deprecated implicit dim: today's function picks it and warns
            return (F.log_softmax if log else F.softmax)(input, dim, _stacklevel, dtype)
        half_to_float = cuda and input.dtype == torch.float16 and dtype == torch.float32
        if dtype is not None and not half_to_float:
            input = input.to(dtype)
        return _SavingInput.apply(input, dim, half_to_float, log)

    return run


def _method(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``Tensor.softmax(dim, dtype=None)`` / ``torch.softmax(input, dim, dtype=None)``: no ``_stacklevel``."""
    return lambda input, dim, dtype=None: function(input, dim, dtype=dtype)


def legacy_softmax_functions(*, cuda: bool) -> dict[Callable[..., Any], Callable[..., Any]]:
    """``KernelRules.functions`` entries running every softmax and log_softmax with PyTorch 1.10's saved set."""
    softmax, log_softmax = _softmax(cuda=cuda, log=False), _softmax(cuda=cuda, log=True)
    return {
        F.softmax: softmax,
        torch.softmax: _method(softmax),
        torch.Tensor.softmax: _method(softmax),
        F.log_softmax: log_softmax,
        torch.log_softmax: _method(log_softmax),
        torch.Tensor.log_softmax: _method(log_softmax),
    }
