"""Liger-Kernel's fused linear cross-entropy, allocating on meta what its Python layer allocates on the GPU.

Liger's Triton kernel cannot run on meta tensors; the Python around it decides every allocation.
This stand-in keeps that Python's allocations, in its order, with torch ops: the head's matmul
and the cross-entropy run over chunks of tokens, and the gradients of the hidden states and of
the head's weight are made in the forward pass, so no logits are saved for backward.

Read at liger-kernel 0.8.5 (PyPI): ``liger_kernel/ops/fused_linear_cross_entropy.py``
(``fused_linear_cross_entropy_forward``, ``fused_linear_cross_entropy_backward``,
``LigerFusedLinearCrossEntropyFunction``) and ``liger_kernel/transformers/model/loss_utils.py``
(``LigerForCausalLMLoss``). Per chunk of ``chunk_size`` tokens (``liger_chunk_size``):

- one logits buffer ``(chunk_size, vocab)`` in the hidden states' dtype, allocated once and
  written by ``torch.mm(out=)``, where the weight and hidden states share a dtype (the autocast
  one under autocast) on CUDA; otherwise a new ``hidden_chunk @ weight.t()`` per chunk;
- the cross-entropy kernel writes the loss into ``loss_1d`` (float32, one per token) and the
  logits' gradient over the logits in place: no allocation;
- ``grad_input`` ``(tokens, hidden)`` like the hidden states, filled by ``torch.mm(out=)`` (or a
  product copied in); ``grad_weight`` like the weight (its dtype: ``accum_dtype=None``, what
  ``LigerForCausalLMLoss`` passes), accumulated by ``addmm(out=)`` on sm80+ when the logits are
  16-bit, else by ``+= mm(...).float()`` with a temporary the weight's size.

Known limitations: ``reduction='none'``, token scaling, z-loss, bias and class weights (none of
which ``LigerForCausalLMLoss`` uses for a causal LM) are not modelled; the backward's
``element_mul_kernel`` (scaling the gradients when the loss is not the last op) is in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["IGNORE_INDEX", "LigerRun", "liger_chunk_size", "liger_fused_linear_cross_entropy"]

IGNORE_INDEX = -100
"""The label the loss skips (``ignore_index``), as transformers and Liger default it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LigerRun:
    """What Liger's Python branches on: the target, autocast and the chunk budget."""

    hip: bool
    """ROCm: ``_can_use_mm_out`` is False there, so logits are a new tensor per chunk."""
    sm80: bool
    """Compute capability 8.0 or newer: ``grad_weight`` is accumulated in place by ``addmm(out=)``."""
    autocast: torch.dtype | None
    """The autocast dtype in force around the loss (``torch.get_autocast_dtype('cuda')`` when enabled)."""
    chunk_mem_const: int
    """The transient-logits budget in multiples of ``tokens x hidden`` elements."""


def liger_chunk_size(tokens: int, hidden: int, vocab: int, chunk_mem_const: int) -> int:
    """Tokens per chunk: ``inc_factor = cdiv(V, C x H)``, ``next_power_of_2(cdiv(BT, inc_factor))``, at most BT,
    so a chunk's logits take about C times as many elements as the hidden states."""
    inc_factor = -(-vocab // (chunk_mem_const * hidden))
    return min(1 << max(0, math.ceil(math.log2(-(-tokens // inc_factor)))), tokens)


def liger_fused_linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, run: LigerRun
) -> torch.Tensor:
    """``LigerForCausalLMLoss`` without bias: labels shifted by padding, hidden states flattened, the fused loss."""
    padded = torch.nn.functional.pad(labels, (0, 1), value=IGNORE_INDEX)
    shifted = padded[..., 1:].contiguous()  # (batch, seq)
    loss: torch.Tensor = _FusedLinearCrossEntropy.apply(hidden.view(-1, hidden.shape[-1]), weight, shifted.view(-1), run)
    return loss


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """``LigerFusedLinearCrossEntropyFunction`` (reduction 'mean'): saves only the gradients made in forward."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, run: LigerRun) -> torch.Tensor:
        loss, grad_input, grad_weight = _forward(hidden, weight, target, run)
        ctx.save_for_backward(grad_input.detach(), grad_weight.detach() if grad_weight is not None else None)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        grad_input, grad_weight = ctx.saved_tensors
        # torch.equal(grad_output, torch.tensor(1.0, device=...)): the scalar it compares with; the scaling
        # that follows when it differs (element_mul_kernel) is in place.
        torch.tensor(1.0, device=grad_output.device)
        return grad_input, grad_weight, None, None


def _forward(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, run: LigerRun
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``fused_linear_cross_entropy_forward``'s allocations, in its order."""
    tokens, width = hidden.shape  # (batch * seq, hidden)
    vocab = weight.shape[0]
    chunk = liger_chunk_size(tokens, width, vocab, run.chunk_mem_const)
    grad_input = torch.zeros_like(hidden)
    grad_weight = torch.zeros_like(weight) if hidden.requires_grad and weight.requires_grad else None
    loss_1d = torch.zeros(tokens, dtype=torch.float32, device=hidden.device)
    target_mask = target != IGNORE_INDEX
    target_mask.sum()  # .item(): the count of labelled tokens, read on the host
    mm_out = _can_use_mm_out(hidden, weight, run)
    storage = torch.empty((chunk, vocab), dtype=hidden.dtype, device=hidden.device) if mm_out else None
    for start in range(0, tokens, chunk):
        end = min(start + chunk, tokens)
        hidden_chunk = hidden[start:end]  # (chunk, hidden)
        if storage is not None:
            logits = storage[: end - start]
            _without_autocast(torch.mm, hidden_chunk, weight.t(), out=logits)
        else:
            logits = hidden_chunk @ weight.t()  # (chunk, vocab)
        # liger_cross_entropy_kernel: loss into loss_1d[start:end], the logits' gradient over the logits
        if mm_out and logits.dtype == grad_input.dtype:
            _without_autocast(torch.mm, logits, weight, out=grad_input[start:end])
        else:
            grad_input[start:end] = logits @ weight
        if grad_weight is not None:
            _accumulate_grad_weight(grad_weight, logits, hidden_chunk, run)
        del logits, hidden_chunk
    del storage
    return torch.sum(loss_1d), grad_input, grad_weight


def _can_use_mm_out(hidden: torch.Tensor, weight: torch.Tensor, run: LigerRun) -> bool:
    """``_can_use_mm_out`` on CUDA with grad mode off (inside ``forward``): same dtypes, and the autocast one."""
    if run.hip or hidden.dtype != weight.dtype or hidden.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    return run.autocast is None or hidden.dtype == run.autocast


def _accumulate_grad_weight(
    grad_weight: torch.Tensor, grad_logits: torch.Tensor, hidden_chunk: torch.Tensor, run: LigerRun
) -> None:
    """``grad_weight += grad_logits.t() @ hidden_chunk`` the three ways Liger does it."""
    half = grad_logits.dtype in (torch.float16, torch.bfloat16)
    if run.sm80 and half and grad_weight.dtype in (torch.float32, grad_logits.dtype):
        chunk = hidden_chunk.to(grad_logits.dtype)  # a copy when the hidden states are float32 under autocast
        extra = {"out_dtype": torch.float32} if grad_weight.dtype == torch.float32 else {}
        _without_autocast(torch.addmm, grad_weight, grad_logits.t(), chunk, out=grad_weight, **extra)
    else:  # the legacy path: a weight-sized product, then its float32 copy where it is not float32 already
        grad_weight += torch.mm(grad_logits.t(), hidden_chunk).float()


def _without_autocast(function: Any, *args: Any, **kwargs: Any) -> Any:
    """An ``out=`` call, which autocast leaves alone (liger's ``_can_use_mm_out`` relies on it): torch
    function modes, the target's emulated autocast among them, are bypassed."""
    with torch._C.DisableTorchFunction():
        return function(*args, **kwargs)
