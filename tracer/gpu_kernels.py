"""Where CUDA's kernels allocate other memory than meta execution: scratch buffers inside one op,
and fused kernels that meta tensors only reach through their decomposition."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .cpu_layout import suggest_memory_format

__all__ = ["GPU_FUNCTIONS", "cuda_cross_entropy", "gpu_rms_norm", "gpu_workspaces"]

_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_backward.default
_CUDNN_BACKWARD = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default
_EMBEDDING_BACKWARD = torch.ops.aten.embedding_dense_backward.default


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def flash_backward_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp ``mha_bwd``.

    ``softmax_d`` (batch, heads, seq_q rounded to 128) and ``dq_accum`` (batch, seq_q rounded,
    heads, head dim rounded to 32) in float32; with grouped-query attention also
    ``dk_expanded`` and ``dv_expanded`` (batch, seq_k, heads, head dim) in the input dtype,
    summed into dk / dv at the end. All are freed when the op returns.
    """
    query, key = args[1], args[2]  # (batch, heads, seq, head_dim)
    batch, heads, seq_q, head_dim = query.shape
    heads_k, seq_k = key.shape[1], key.shape[2]
    seq_q_rounded = _round_up(seq_q, 128)
    softmax_d = batch * heads * seq_q_rounded * 4
    dq_accum = batch * seq_q_rounded * heads * _round_up(head_dim, 32) * 4
    expanded = 2 * batch * seq_k * heads * head_dim * query.element_size() if heads_k != heads else 0
    return softmax_d + dq_accum + expanded


def cudnn_backward_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/cudnn/MHA.cpp ``run_cudnn_SDP_bprop`` takes ``get_workspace_size()`` bytes
    from the caching allocator for the call. cudnn-frontend's share (node/scaled_dot_product_flash_attention.h,
    ``get_fe_workspace_size_node``; cuDNN >= 9.0 without dBias or determinism) is ``dQ_accum``
    (batch, heads, seq_q, head_dim) and ``softmax_sum`` (batch, heads, seq_q) in float32. Grouped
    key/value heads need no expanded dK/dV there: dense ``dK_fullhead``/``dV_fullhead`` are virtual.
    The cuDNN engine's own workspace is opaque and not counted.
    """
    query = args[1]  # (batch, heads, seq_q, head_dim)
    batch, heads, seq_q, head_dim = query.shape
    return batch * heads * seq_q * (head_dim + 1) * 4


_EMBEDDING_FEATURE_KERNEL_MAX_INDICES = 3072
"""Embedding.cu ``embedding_dense_backward_cuda``: up to 3072 indices (and no ``scale_grad_by_freq``)
take the feature kernel, which allocates nothing beside ``grad_weight``."""


def embedding_backward_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/cuda/Embedding.cu ``embedding_dense_backward_cuda`` above 3072 indices:
    ``sorted_indices``, ``orig_indices``, the ``arange`` it sorts, ``count`` with ``scale_grad_by_freq``;
    then EmbeddingBackwardKernel.cu ``embedding_backward_cuda_kernel``: ``segment_offsets``,
    ``partials_per_segment``, ``partials_per_segment_offset``, ``partial_segment_offset`` (n indices
    each), two int64 counters, and ``grad_weight_per_segment`` (n, embedding dim) in float32 for
    fp16/bf16 gradients, else in the gradient's dtype. All are live together beside ``grad_weight``.
    cub's sort and scan temporaries are not counted.
    """
    grad, indices, _, _, scale_grad_by_freq = args[:5]
    count = indices.numel()
    if count <= _EMBEDDING_FEATURE_KERNEL_MAX_INDICES and not scale_grad_by_freq:
        return 0
    index_arrays = (3 + int(bool(scale_grad_by_freq)) + 4) * count * indices.element_size()
    partial_size = 4 if grad.dtype in (torch.float16, torch.bfloat16) else grad.element_size()
    return index_arrays + 2 * 8 + count * grad.shape[-1] * partial_size


def gpu_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """``KernelRules.workspaces`` for CUDA targets."""
    if func is _FLASH_BACKWARD:
        return [flash_backward_workspace(args)]
    if func is _CUDNN_BACKWARD:
        return [cudnn_backward_workspace(args)]
    if func is _EMBEDDING_BACKWARD:
        nbytes = embedding_backward_workspace(args)
        return [nbytes] if nbytes else []
    return []


# -- fused RMSNorm ------------------------------------------------------------------------------


def gpu_rms_norm(
    input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    """aten/src/ATen/native/layer_norm.cpp ``rms_norm_symint``: channels-last or complex input, or a
    weight of another dtype, take ``rms_norm_composite`` (what meta tensors always run, since
    ``_fused_rms_norm`` has no Meta kernel); everything else calls ``_fused_rms_norm``, which CUDA
    implements as one kernel (cuda/layer_norm_kernel.cu ``_fused_rms_norm_cuda``)."""
    channels_last = suggest_memory_format(input) in (torch.channels_last, torch.channels_last_3d)
    mismatch = weight is not None and weight.dtype != input.dtype
    if channels_last or input.is_complex() or mismatch:
        return torch.rms_norm(input, normalized_shape, weight, eps)
    return _FusedRmsNorm.apply(input, weight, tuple(normalized_shape))


class _FusedRmsNorm(torch.autograd.Function):
    """``_fused_rms_norm`` as CUDA runs it. ``_fused_rms_norm_cuda`` allocates ``Y`` like the
    contiguous input and ``rstd`` of (rows,) in ``acc_type`` (float32 for half, bfloat16 and float32
    inputs), viewed to the input's rank; tools/autograd/derivatives.yaml saves ``input``, ``weight``
    and ``result1`` (rstd) and, outside double backward, calls ``_fused_rms_norm_backward``, which has
    a Meta kernel. The composite instead keeps an upcast copy and the normalised product, two
    float32 tensors of the input's size."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor | None, normalized_shape: tuple[int, ...]) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        stat_shape = (*x.shape[: x.dim() - len(normalized_shape)], *[1] * len(normalized_shape))
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        rstd = torch.empty(stat_shape, dtype=acc, device=x.device)
        ctx.save_for_backward(x, weight, rstd)
        ctx.normalized_shape = list(normalized_shape)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, rstd = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[1]]
        grad_input, grad_weight = torch.ops.aten._fused_rms_norm_backward(grad, x, ctx.normalized_shape, rstd, weight, mask)
        return grad_input, grad_weight, None


# -- cross-entropy under autocast ---------------------------------------------------------------


def cuda_cross_entropy(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """aten/src/ATen/native/LossNLL.cpp ``cross_entropy_loss_symint`` for class-index targets without
    label smoothing: ``nll_loss_nd(log_softmax(self, class_dim, self.scalar_type()), ...)``. The
    composite is on no CUDA autocast list, so its inner ops meet autocast: ``log_softmax`` keeps the
    input dtype (its dtype is given), then ``nll_loss`` (fp32 list) casts that to float32, and
    ``NllLossBackward0`` saves the float32 copy beside the low-precision ``log_softmax`` result.
    Written in Python so the emulation's autocast sees those inner calls; other cases keep the
    original composite."""
    if target.is_floating_point() or label_smoothing > 0.0:
        return F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    class_dim = 0 if input.dim() == 1 else 1
    log_probs = torch.log_softmax(input, class_dim, dtype=input.dtype)
    return F.nll_loss(log_probs, target, weight, size_average, ignore_index, reduce, reduction)


GPU_FUNCTIONS = {
    F.rms_norm: gpu_rms_norm,
    torch.rms_norm: gpu_rms_norm,
    F.cross_entropy: cuda_cross_entropy,
}
"""Python-level functions whose CUDA path differs from the one meta tensors take."""
