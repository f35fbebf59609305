"""Scratch buffers that CUDA kernels allocate inside one op, which meta kernels never show."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["gpu_workspaces"]

_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_backward.default


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


def gpu_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """``KernelRules.workspaces`` for CUDA targets."""
    if func is _FLASH_BACKWARD:
        return [flash_backward_workspace(args)]
    return []
