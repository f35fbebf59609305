"""Which SDPA kernel a target runs, and running it on meta tensors so autograd saves what it saves."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .emulation import AttentionCall, boolean_mask_to_additive

__all__ = ["cpu_attention", "cpu_attention_workspaces"]

_FLASH = 1
"""``sdp::SDPBackend::flash_attention`` (aten/src/ATen/native/transformers/sdp_utils_cpp.h)."""


def cpu_attention(call: AttentionCall) -> torch.Tensor | None:
    """attention.cpp ``scaled_dot_product_attention`` on CPU: flash when the CPU's own selector
    picks it, else the math path (which meta execution already takes).

    The selector is PyTorch's real ``_fused_sdp_choice`` run on CPU stand-ins with the same
    shapes, dtypes and last-dim strides; their other strides are zero, so they cost a few bytes.
    """
    if _cpu_choice(call) != _FLASH:
        return None
    mask = boolean_mask_to_additive(call.attn_mask, call.query.dtype)
    out, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        call.query, call.key, call.value, call.dropout_p, call.is_causal, attn_mask=mask, scale=call.scale
    )
    return out


def _cpu_choice(call: AttentionCall) -> int:
    with _disable_current_modes():
        stand_ins = [_stand_in(t) for t in (call.query, call.key, call.value, call.attn_mask)]
        return torch._fused_sdp_choice(
            *stand_ins[:3], stand_ins[3], call.dropout_p, call.is_causal, scale=call.scale, enable_gqa=call.enable_gqa
        )


def _stand_in(tensor: torch.Tensor | None) -> torch.Tensor | None:
    if tensor is None:
        return None
    strides = [0] * (tensor.dim() - 1) + [tensor.stride(-1)] if tensor.dim() else []
    return torch.empty_strided(tuple(tensor.shape), strides, dtype=tensor.dtype, requires_grad=tensor.requires_grad)


def cpu_attention_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """Scratch buffers of the CPU flash kernels (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp).

    Forward ``cpu_flash_attention``: per thread ``buf`` of (qSplit*kvSplit + 2*qSplit + qSplit*D)
    accumulate-type values, and ``buf_reduced`` of qSplit*kvSplit values for bf16/fp16.
    Backward ``cpu_flash_attention_backward``: per thread 2*qSplit*kvSplit accumulate values,
    the reduced copy for bf16/fp16, and one ``dsum`` of qSplit values.
    """
    if func not in (_FLASH_FORWARD, _FLASH_BACKWARD):
        return []
    forward = func is _FLASH_FORWARD
    query, key = (args[0], args[1]) if forward else (args[1], args[2])
    q_len, kv_len, head_dim = query.shape[2], key.shape[2], query.shape[3]
    q_split = min(256 if q_len >= 768 else 64 if q_len >= 192 else 32, q_len)
    kv_split = min(512, kv_len)
    threads = torch.get_num_threads()
    reduced = query.dtype in (torch.bfloat16, torch.float16)
    accum = 4 if query.dtype != torch.float64 else 8
    element = query.element_size()
    if forward:
        buf = threads * (q_split * kv_split + 2 * q_split + q_split * head_dim) * accum
        return [buf + (threads * q_split * kv_split * element if reduced else 0)]
    buf = threads * 2 * q_split * kv_split * accum
    return [buf + (threads * 2 * q_split * kv_split * element if reduced else 0) + q_split * accum]


_FLASH_FORWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
