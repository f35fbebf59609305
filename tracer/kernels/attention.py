"""Which SDPA kernel a target runs, and running it on meta tensors so autograd saves what it saves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .emulation import AttentionCall, boolean_mask_to_additive

__all__ = ["CUDNN_RUNTIME_VERSION", "GpuAttention", "cpu_attention", "cpu_attention_workspaces"]

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
    mask = None if call.attn_mask is None else _layout(call.attn_mask)
    layouts = (_layout(call.query), _layout(call.key), _layout(call.value), mask)
    return _cpu_choice_of(layouts, call.dropout_p, call.is_causal, call.scale, call.enable_gqa)


_Layout = tuple[tuple[int, ...], int, torch.dtype, bool]
"""What the selector reads of a tensor: shape, last-dim stride, dtype, requires_grad."""


def _layout(tensor: torch.Tensor) -> _Layout:
    return tuple(tensor.shape), tensor.stride(-1) if tensor.dim() else 1, tensor.dtype, tensor.requires_grad


@torch.compiler.assume_constant_result
def _cpu_choice_of(
    layouts: tuple[_Layout, _Layout, _Layout, _Layout | None],
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> int:
    """The selector on stand-ins; under ``torch.compile`` it runs once, at trace time, on the
    static layouts (the choice is part of the compiled graph, as on the device)."""
    with _disable_current_modes():
        query, key, value = (_stand_in(layout) for layout in layouts[:3])
        mask = None if layouts[3] is None else _stand_in(layouts[3])
        return torch._fused_sdp_choice(query, key, value, mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def _stand_in(layout: _Layout) -> torch.Tensor:
    shape, last_stride, dtype, requires_grad = layout
    strides = [0] * (len(shape) - 1) + [last_stride] if shape else []
    return torch.empty_strided(shape, strides, dtype=dtype, requires_grad=requires_grad)


def cpu_attention_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """Scratch buffers of the CPU flash kernels (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp).

    Forward ``cpu_flash_attention``: per thread ``buf`` of (qSplit*kvSplit + 2*qSplit + qSplit*D)
    accumulate-type values, and ``buf_reduced`` of qSplit*kvSplit values for bf16/fp16.
    Backward ``cpu_flash_attention_backward``: per thread 2*qSplit*kvSplit accumulate values,
    the reduced copy for bf16/fp16, and one ``dsum`` of qSplit values; ``flash_attention_backward_kernel_impl``
    first copies ``grad_out`` (in the kernel's batch x q_len x heads x dim layout) with ``.contiguous()``,
    a copy where the model's layout differs (FLUX's attention; not Llama's).
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
    scratch = buf + (threads * 2 * q_split * kv_split * element if reduced else 0) + q_split * accum
    grad_out = args[0].transpose(1, 2)  # the kernel's (batch, q_len, heads, dim) view, made contiguous first
    copy = 0 if grad_out.is_contiguous() else grad_out.numel() * grad_out.element_size()  # alive with the scratch
    return [scratch + copy]


_FLASH_FORWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default


CUDNN_RUNTIME_VERSION = 92000
"""cuDNN 9.20.0, the runtime of torch 2.13's default CUDA 13.0 wheels (RELEASE.md, Release
Compatibility Matrix: "CUDA 13.0 (CUDNN 9.20.0.48)"). It decides whether cuDNN attention comes
first (``check_prefer_cudnn_attention``: runtime > 9.15.0) and its head-dim limit."""

_CUDNN_SDPA_HEAD_DIM = 128
"""``check_cudnn_tensor_shapes``: head dims up to 128; 256 needs cuDNN > 9.22 (not 2.13's wheels)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuAttention:
    """SDPA backend selection of a CUDA/ROCm device, as aten/src/ATen/native/transformers/cuda/
    sdp_utils.cpp ``select_sdp_backend`` does it (read at pytorch commit 001f694a, the stored
    version closest to torch 2.13.0 = cf30153c).

    ``priority_order``: cuDNN, flash, efficient, math where ``check_prefer_cudnn_attention``
    holds (CUDA 13 builds: runtime cuDNN > 9.15.0 on compute capability 9.x or 10.x, i.e. H100,
    H200, B200); elsewhere flash, efficient, math, cuDNN, and since math always runs, cuDNN is
    never picked by default. ROCm has no cuDNN; its flash and efficient kernels are AOTriton's.
    """

    compute_capability: tuple[int, int]
    """sm version; ROCm devices pass (9, 0), which only the generic checks read."""
    rocm: bool = False

    def backend(self, call: AttentionCall) -> str:
        """The first backend of the priority order the user has not disabled (``sdpa_kernel``, ``enable_*_sdp``:
        ``sdp_utils.cpp`` checks ``ctx.userEnabled*SDP()`` first) whose constraints the call meets; else math."""
        order = ("cudnn", "flash", "efficient") if self.prefers_cudnn() else ("flash", "efficient")
        checks = {"cudnn": self._cudnn_ok, "flash": self._flash_ok, "efficient": self._efficient_ok}
        enabled = dict(zip(("cudnn", "flash", "efficient"), _user_enabled(), strict=True))
        return next((name for name in order if enabled[name] and _dense_ok(call) and checks[name](call)), "math")

    def prefers_cudnn(self) -> bool:
        """``check_prefer_cudnn_attention`` (CUDA >= 13 builds): cuDNN > 9.15.0 on sm9x / sm10x."""
        return not self.rocm and CUDNN_RUNTIME_VERSION > 91500 and self.compute_capability[0] in (9, 10)

    def _flash_ok(self, call: AttentionCall) -> bool:
        """``can_use_flash_attention``: sm80..sm121 (AOTriton on ROCm), fp16/bf16, equal head dims up
        to 256 (512 with AOTriton), no mask, causal only for square attention, GQA when asked."""
        q, k, v = call.query, call.key, call.value
        head_dim = q.shape[-1]
        return (
            (self.rocm or (8, 0) <= self.compute_capability <= (12, 1))
            and q.dtype in (torch.float16, torch.bfloat16)
            and head_dim == k.shape[-1] == v.shape[-1] <= (512 if self.rocm else 256)
            and call.attn_mask is None
            and not (call.is_causal and q.shape[-2] != k.shape[-2])
            and self._flash_head_dim_trains(call)
            and _heads_ok(call, gqa=True, same_kv_heads=True)
        )

    def _flash_head_dim_trains(self, call: AttentionCall) -> bool:
        """``check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120``: consumer
        Ampere/Ada/Blackwell have no flash backward for head dims in (192, 224], nor above 224
        with dropout."""
        consumer = (8, 6) <= self.compute_capability <= (8, 9) or (12, 0) <= self.compute_capability <= (12, 1)
        if self.rocm or not consumer or not _requires_grad(call):
            return True
        head_dim = call.query.shape[-1]
        return head_dim <= 192 or (call.dropout_p == 0.0 and head_dim > 224)

    def _efficient_ok(self, call: AttentionCall) -> bool:
        """``can_use_mem_efficient_attention``: sm50..sm121, bf16 from sm80, head dims a multiple of
        ``minimum_gemm_alignment``; equal heads (the installed meta kernels' backward has no GQA)."""
        q, k, v = call.query, call.key, call.value
        half = q.dtype in (torch.float16, torch.bfloat16)
        dtypes = (
            (torch.float16, torch.float32)
            if not self.rocm and self.compute_capability < (8, 0)
            else (torch.float16, torch.bfloat16, torch.float32)
        )
        alignment = self._gemm_alignment(half)
        return (
            (self.rocm or (5, 0) <= self.compute_capability <= (12, 1))
            and q.dtype in dtypes
            and q.shape[-1] == k.shape[-1]
            and q.shape[-1] % alignment == 0
            and v.shape[-1] % alignment == 0
            and q.shape[-1] > 0
            and v.shape[-1] > 0
            and (not self.rocm or max(q.shape[-1], v.shape[-1]) <= 512)
            and _heads_ok(call, gqa=False, same_kv_heads=True)
        )

    def _gemm_alignment(self, half: bool) -> int:
        """``minimum_gemm_alignment`` (CUDA; ROCm: 8 for half, else 4): 4 from sm80, and 128 bits
        per tensor-core operand where tensor cores run (sm80+, or sm70+ for half)."""
        if self.rocm:
            return 8 if half else 4
        tensor_cores = self.compute_capability >= (8, 0) or (self.compute_capability >= (7, 0) and half)
        alignment = 4 if self.compute_capability >= (8, 0) else 1
        return max(alignment, 128 // (16 if half else 32)) if tensor_cores else alignment

    def _cudnn_ok(self, call: AttentionCall) -> bool:
        """``can_use_cudnn_attention``: sm80..sm121, fp16/bf16, broadcastable mask, dropout in
        steps of 1/16, GQA, batch and heads up to 65535, head dims multiples of 8 up to 128 (192/128
        on sm90/sm10x), key length above 1 (``check_cudnn_tensor_shapes``)."""
        q, k, v = call.query, call.key, call.value
        d_qk, d_v = q.shape[-1], v.shape[-1]
        sm90_or_10x = self.compute_capability == (9, 0) or self.compute_capability[0] == 10
        limit_ok = max(d_qk, d_v) <= _CUDNN_SDPA_HEAD_DIM or (sm90_or_10x and (d_qk, d_v) == (192, 128))
        return (
            not self.rocm
            and (8, 0) <= self.compute_capability <= (12, 1)
            and q.dtype in (torch.float16, torch.bfloat16)
            and _mask_shape_ok(call)
            and float(call.dropout_p * 16).is_integer()
            and _heads_ok(call, gqa=True, same_kv_heads=False)
            and q.shape[0] <= 65535
            and q.shape[1] <= 65535
            and limit_ok
            and d_qk % 8 == 0
            and d_v % 8 == 0
            and k.shape[-2] != 1
            and not (call.dropout_p > 0 and q.shape[-2] == 1)
        )

    def __call__(self, call: AttentionCall) -> torch.Tensor | None:
        """attention.cpp ``scaled_dot_product_attention`` for the chosen backend, on meta tensors."""
        choice = self.backend(call)
        if choice == "cudnn":
            return _cudnn(call)
        if choice == "flash":
            return _flash(call)
        if choice == "efficient":
            return _efficient(call)
        return None


@torch.compiler.assume_constant_result
def _user_enabled() -> tuple[bool, bool, bool]:
    """Whether the user left cuDNN, flash and efficient attention on (``sdpa_kernel``, ``enable_*_sdp``);
    under ``torch.compile`` read once, at trace time, as the device's compiled graph fixes its kernel
    (dynamo cannot trace these getters, and a graph break inside the emulation's torch-function mode
    resumes the model's frame with wrong values)."""
    backends = torch.backends.cuda
    return backends.cudnn_sdp_enabled(), backends.flash_sdp_enabled(), backends.mem_efficient_sdp_enabled()


def _requires_grad(call: AttentionCall) -> bool:
    """attention.cpp ``should_compute_logsumexp``: inputs need grad and grad mode is on."""
    needs = call.query.requires_grad or call.key.requires_grad or call.value.requires_grad
    return needs and torch.is_grad_enabled()


def _dense_ok(call: AttentionCall) -> bool:
    """The checks every fused backend makes (sdp_utils_cpp.h): 4-d inputs, nonzero sequence
    lengths, last dims of stride 1 (mask included), one batch size."""
    q, k, v = call.query, call.key, call.value
    mask = call.attn_mask
    return (
        q.dim() == k.dim() == v.dim() == 4
        and q.shape[-2] > 0
        and k.shape[-2] > 0
        and (q.stride(-1) == k.stride(-1) == v.stride(-1) == 1 or q.shape[-1] == 1)
        and (mask is None or mask.stride(-1) == 1)
        and q.shape[0] == k.shape[0] == v.shape[0]
    )


def _heads_ok(call: AttentionCall, *, gqa: bool, same_kv_heads: bool) -> bool:
    """``check_batch_size_and_num_heads_dense``: equal heads, or with ``enable_gqa`` on a backend
    that supports it, query heads a multiple of key (and value) heads."""
    q_heads, k_heads, v_heads = call.query.shape[1], call.key.shape[1], call.value.shape[1]
    if q_heads == k_heads == v_heads:
        return True
    if not (gqa and call.enable_gqa) or (same_kv_heads and k_heads != v_heads):
        return False
    return q_heads % k_heads == 0 and q_heads % v_heads == 0


def _mask_shape_ok(call: AttentionCall) -> bool:
    """sdp_utils_cpp.h ``check_attn_mask_shape``: a 2-d or broadcastable 4-d mask without grad."""
    mask = call.attn_mask
    if mask is None:
        return True
    batch, heads, q_len = call.query.shape[:3]
    if mask.requires_grad or mask.shape[-2] not in (q_len, 1) or mask.shape[-1] not in (call.key.shape[-2], 1):
        return False
    return mask.dim() == 2 or (mask.dim() == 4 and mask.shape[0] in (1, batch) and mask.shape[1] in (1, heads))


def _cudnn(call: AttentionCall) -> torch.Tensor:
    """attention.cpp, cuDNN case: a bool mask becomes an additive one (``convert_boolean_attn_mask_cudnn``,
    same size), then ``_scaled_dot_product_cudnn_attention``, which saves output, logsumexp
    (batch, heads, seq_q, 1) in fp32 and the philox seed and offset."""
    mask = boolean_mask_to_additive(call.attn_mask, call.query.dtype)
    return torch.ops.aten._scaled_dot_product_cudnn_attention(
        call.query,
        call.key,
        call.value,
        mask,
        _requires_grad(call),
        call.dropout_p,
        call.is_causal,
        False,
        scale=call.scale,
    )[0]


def _efficient(call: AttentionCall) -> torch.Tensor:
    mask = boolean_mask_to_additive(call.attn_mask, call.query.dtype)
    if mask is not None:
        mask = _preprocess_mask(mask, call)
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        call.query, call.key, call.value, mask, _requires_grad(call), call.dropout_p, call.is_causal, scale=call.scale
    )[0]


_MEM_EFF_ALIGNMENT = 8
"""attention.cpp ``preprocess_mask``: ``constexpr int mem_eff_alignment = 8``."""


def _preprocess_mask(mask: torch.Tensor, call: AttentionCall) -> torch.Tensor:
    """attention.cpp ``preprocess_mask``: a mask whose strides are not multiples of 8 (or whose
    last stride is not 1) is copied into a buffer whose last dim is padded by ``8 - S % 8``
    (``pad_bias``; a full 8 when S is already a multiple) and sliced back; then expanded to
    (batch, heads, seq_q, seq_k). The efficient kernel saves it, so the padded copy lives until
    backward."""
    aligned = all(stride % _MEM_EFF_ALIGNMENT == 0 for stride in mask.stride()[:-1]) and mask.stride(-1) == 1
    if not aligned:
        last = mask.shape[-1]
        mask = torch.nn.functional.pad(mask, (0, _MEM_EFF_ALIGNMENT - last % _MEM_EFF_ALIGNMENT))[..., :last]
    batch, heads, q_len = call.query.shape[:3]
    return mask.expand(batch, heads, q_len, call.key.shape[-2])


def _flash(call: AttentionCall) -> torch.Tensor:
    """The CUDA flash path pads head dims to a multiple of 8 and slices the output back."""
    head_dim = call.query.shape[-1]
    pad = (8 - head_dim % 8) % 8
    q, k, v = (torch.nn.functional.pad(t, (0, pad)) if pad else t for t in (call.query, call.key, call.value))
    scale = call.scale if call.scale is not None else head_dim**-0.5
    out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, call.dropout_p, call.is_causal, False, scale=scale)[0]
    return out[..., :head_dim] if pad else out
