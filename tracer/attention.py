"""Which SDPA kernel a target runs, and running it on meta tensors so autograd saves what it saves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .emulation import AttentionCall, boolean_mask_to_additive

__all__ = ["GpuAttention", "cpu_attention", "cpu_attention_workspaces"]

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


@dataclass(frozen=True, slots=True)
class GpuAttention:
    """SDPA backend selection of a CUDA/ROCm device (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp,
    ``select_sdp_backend``): flash, then memory-efficient, then math; cuDNN only when asked for."""

    compute_capability: tuple[int, int]
    """sm version; ROCm devices that run AOTriton kernels pass (9, 0)."""

    def backend(self, call: AttentionCall) -> str:
        if self._flash_ok(call):
            return "flash"
        if self._efficient_ok(call):
            return "efficient"
        return "math"

    def _flash_ok(self, call: AttentionCall) -> bool:
        """``use_flash_attention``: sm80+, fp16/bf16, head dim <= 256, no explicit mask."""
        q, k, v = call.query, call.key, call.value
        return (
            self.compute_capability >= (8, 0)
            and q.dtype in (torch.float16, torch.bfloat16)
            and q.dim() == 4
            and q.shape[-1] == k.shape[-1] == v.shape[-1]
            and q.shape[-1] <= 256
            and call.attn_mask is None
            and not (call.is_causal and q.shape[-2] != k.shape[-2] and q.shape[-2] != 1)
        )

    def _efficient_ok(self, call: AttentionCall) -> bool:
        """``use_mem_efficient_attention``: sm50+, bf16 from sm80, aligned head dims, no GQA."""
        q, k = call.query, call.key
        alignment = 4 if q.dtype == torch.float32 else 8
        return (
            self.compute_capability >= (5, 0)
            and (q.dtype != torch.bfloat16 or self.compute_capability >= (8, 0))
            and q.dtype in (torch.float16, torch.bfloat16, torch.float32)
            and q.dim() == 4
            and q.shape[-1] % alignment == 0
            and not (call.enable_gqa and q.shape[1] != k.shape[1])
        )

    def __call__(self, call: AttentionCall) -> torch.Tensor | None:
        """attention.cpp ``scaled_dot_product_attention`` for the chosen backend, on meta tensors."""
        choice = self.backend(call)
        if choice == "flash":
            return _flash(call)
        if choice == "efficient":
            mask = boolean_mask_to_additive(call.attn_mask, call.query.dtype)
            needs_lse = call.query.requires_grad or call.key.requires_grad or call.value.requires_grad
            out = torch.ops.aten._scaled_dot_product_efficient_attention(
                call.query, call.key, call.value, mask, needs_lse, call.dropout_p, call.is_causal, scale=call.scale
            )
            return out[0]
        return None


def _flash(call: AttentionCall) -> torch.Tensor:
    """The CUDA flash path pads head dims to a multiple of 8 and slices the output back."""
    head_dim = call.query.shape[-1]
    pad = (8 - head_dim % 8) % 8
    q, k, v = (torch.nn.functional.pad(t, (0, pad)) if pad else t for t in (call.query, call.key, call.value))
    scale = call.scale if call.scale is not None else head_dim**-0.5
    out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, call.dropout_p, call.is_causal, False, scale=scale)[0]
    return out[..., :head_dim] if pad else out
