"""Buffers an fp32 convolution on PyTorch's oneDNN (mkldnn) CPU backend allocates inside the op.

Meta execution runs no kernel, so these are invisible to dispatch-level tracing. The rule replays,
in order, the allocations and frees the C++ makes through c10's CPU allocator and returns their
peak above the op's outputs (the tracer places a workspace after the outputs). Sources are
PyTorch 2.13 (aten/src/ATen/native/Convolution.cpp, mkldnn/Conv.cpp), ideep (convolution.hpp:
``compute_impl`` reorders an operand only when its format differs from the one the primitive
expects; every ideep buffer, scratchpad included, is allocated by c10's CPU allocator, see
mkldnn/IDeepRegistration.cpp) and the oneDNN v3.12 bundled with it.

Formats oneDNN picks for f32 on ``avx512_core`` (no AMX), read from its init_conf functions:
    ATen layout contiguous   src/cpu/x64/jit_avx512_common_conv_kernel.cpp (and the 1x1 kernel):
                             activations nChw16c, weights OIhw16i16o / OIhw16o16i, channels
                             padded to 16; a first convolution (ic < 16, not 1x1) reads its
                             source as is (nchw) with Ohwi16o weights (``is_1stconv``).
    ATen channels-last       src/cpu/x64/brgemm/brgemm_convolution_utils.cpp (forward and
                             backward data): activations nhwc as they are, weights blocked by
                             the oc (bwd data: ic) block of 16, 32 or 64; backward weights is
                             jit_avx512_common's (nhwc activations, OIhw16i16o weights).

Known limitations (no buffer is added where the rule declines, see ``_modelled``):
    - Only 2-D, groups = 1, fp32, non-transposed convolutions, with a unit stride and dilation
      in backward (a strided backward-data takes ``brgconv_strided`` in nhwc, with its own
      scratchpad). The backward and the channels-last path further need an oc that is a multiple
      of 16 and an ic that is a multiple of 16 or at most 3 (8 <= ic < 16 sends backward weights
      to ``jit:avx2`` with 8-blocking); the contiguous forward takes any (padded to 16).
    - Scratchpads are not counted, but for the direct forward kernel's padded bias (the only entry
      it books, where oc is not a multiple of 16). The brgemm convolutions of the channels-last path (forward,
      backward data) book one measured at 4096 + 4120 * threads bytes whatever the shape,
      whose bookings (src/cpu/x64/brgemm conv ``init_scratchpad``) are not derived yet; the
      direct kernels' backward-weights reduction buffers appear when oneDNN splits the batch
      across threads (e.g. batch 4, 48 -> 16 channels) and are not modelled either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch

from .cpu_kernels import conv_backend

__all__ = ["onednn_conv_isa", "onednn_conv_workspaces"]

_CONV = torch.ops.aten.convolution.default
_CONV_BACKWARD = torch.ops.aten.convolution_backward.default
_MKLDNN = torch._C._ConvBackend.Mkldnn  # type: ignore[attr-defined]  # torch's stub spells it ConvBackend
_SIMD = 16
"""f32 lanes of an AVX-512 register: the channel block of oneDNN's avx512_core kernels."""
_SCRATCHPAD_ALIGNMENT = 128
"""Bytes oneDNN's scratchpad registry adds to each entry's capacity so that it can be aligned
(src/common/memory_tracking.hpp: ``registry_t::book``, ``capacity = size + get_alignment(alignment)``, at least
``default_alignment``)."""


def _rnd_up(a: int, b: int) -> int:
    return -(-a // b) * b


@dataclass(slots=True)
class _Allocations:
    """The running total of a replayed allocation sequence and its peak."""

    live: int = 0
    peak: int = 0
    held: dict[str, int] = field(default_factory=dict)

    def alloc(self, name: str, nbytes: int) -> None:
        if nbytes:
            self.held[name] = nbytes
            self.live += nbytes
            self.peak = max(self.peak, self.live)

    def free(self, *names: str) -> None:
        for name in names:
            self.live -= self.held.pop(name, 0)


def onednn_conv_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """Peak bytes ``mkldnn_convolution`` / ``mkldnn_convolution_backward`` hold above their outputs."""
    if func is _CONV:
        x, weight, params = args[0], args[1], args[3:9]
        grad_output, mask, bias = None, None, args[2] is not None
    elif func is _CONV_BACKWARD:
        grad_output, x, weight, params, mask, bias = args[0], args[1], args[2], args[4:10], args[10], False
    else:
        return []
    if not isinstance(x, torch.Tensor) or not _modelled(x, weight, params, backward=mask is not None):
        return []
    if mask is not None and mask[2] and not mask[1]:
        return []  # grad_weight is computed but not returned: not modelled
    if conv_backend(x, weight, *params) != _MKLDNN:
        return []
    memory_format = torch._C._conv_determine_backend_memory_format(x, weight, _MKLDNN)
    shape = _Shape.of(x, weight, params, channels_last=memory_format == torch.channels_last)
    if (mask is not None or shape.channels_last) and not _blocks_evenly(shape):
        return []
    events = _Allocations()
    # Convolution.cpp _convolution (Mkldnn case) / mkldnn_convolution_backward: operands are
    # made contiguous in the backend memory format; the copies live until the op returns.
    operands = [x, weight] if mask is None else [grad_output, x, weight]
    for i, t in enumerate(operands):
        if not t.is_contiguous(memory_format=memory_format):
            events.alloc(f"contiguous{i}", t.numel() * t.element_size())
    outputs = 0
    if mask is None:
        outputs += _forward(events, shape, bias)
    else:
        if mask[0]:
            outputs += _backward_data(events, shape)
        if mask[1] or mask[2]:
            outputs += _backward_weights(events, shape, bool(mask[2]))
    transient = events.peak - outputs
    return [transient] if transient > 0 else []


@lru_cache(maxsize=1)
def onednn_conv_isa() -> str | None:
    """``avx512_core`` when oneDNN's f32 convolutions use the AVX-512 kernels whose formats are
    modelled here (src/cpu/x64/cpu_isa_traits.hpp); AMX machines are left out, unverified."""
    if not torch.backends.mkldnn.is_available():
        return None
    caps = torch._C._cpu._get_cpu_capability()
    if caps.get("amx_tile") or caps.get("amx_bf16") or caps.get("avx10_2"):
        return None
    if all(caps.get(k) for k in ("avx512_f", "avx512_bw", "avx512_vl", "avx512_dq")):
        return "avx512_core"
    return None


def _modelled(x: torch.Tensor, weight: torch.Tensor, params: Any, *, backward: bool) -> bool:
    if onednn_conv_isa() is None:
        return False
    stride, dilation, transposed, groups = params[0], params[2], params[3], params[5]
    if x.dim() != 4 or transposed or groups != 1 or x.dtype != torch.float32:
        return False
    return all(d == 1 for d in dilation) and not (backward and any(s != 1 for s in stride))


def _blocks_evenly(s: _Shape) -> bool:
    """Channel counts whose backward and channels-last kernels are the ones modelled: an oc that is a multiple of 16,
    an ic that is one or at most 3 (8 <= ic < 16 sends backward weights to ``jit:avx2`` with 8-blocking). The direct
    forward kernel of the contiguous layout pads any count to 16 (``_forward``)."""
    return s.oc % _SIMD == 0 and (s.ic % _SIMD == 0 or s.ic <= 3)


@dataclass(frozen=True, slots=True)
class _Shape:
    """A convolution's sizes, in f32 elements."""

    n: int
    ic: int
    oc: int
    in_hw: int
    out_hw: int
    kernel: int
    first: bool
    """oneDNN's ``is_1stconv``: a few input channels, read in nchw by the direct kernel."""
    channels_last: bool

    @staticmethod
    def of(x: torch.Tensor, weight: torch.Tensor, params: Any, *, channels_last: bool) -> _Shape:
        stride, padding = params[0], params[1]
        n, ic, h, w = x.shape
        oc, _, kh, kw = weight.shape
        out_h = (h + 2 * padding[0] - kh) // stride[0] + 1
        out_w = (w + 2 * padding[-1] - kw) // stride[-1] + 1
        first = ic < _SIMD and (kh, kw) != (1, 1)
        return _Shape(n, ic, oc, h * w, out_h * out_w, kh * kw, first, channels_last)

    def activation(self, channels: int, hw: int, *, blocked: bool) -> int:
        return 4 * self.n * (_rnd_up(channels, _SIMD) if blocked else channels) * hw

    def blocked_weights(self) -> int:
        """OIhw16i16o (both channel counts padded), or Ohwi16o for a first convolution."""
        ic = self.ic if self.first else _rnd_up(self.ic, _SIMD)
        return 4 * _rnd_up(self.oc, _SIMD) * ic * self.kernel

    def brgemm_weights(self, blocked_channels: int, other_channels: int) -> int:
        """brgemm_convolution_utils.cpp: the blocked channel count is padded to its block, the
        largest of 64, 32, 16 that fits its count padded to 16."""
        padded = _rnd_up(blocked_channels, _SIMD)
        block = next(b for b in (64, 32, _SIMD) if padded >= b)
        return 4 * _rnd_up(blocked_channels, block) * other_channels * self.kernel


def _forward(events: _Allocations, s: _Shape, bias: bool) -> int:
    """Conv.cpp ``_mkldnn_convolution``; returns the output's bytes."""
    output = s.activation(s.oc, s.out_hw, blocked=False)
    if s.channels_last:
        # the output is allocated in ATen (resize_ to channels-last) and written in place; the
        # nhwc source is read as is; only the weights are reordered.
        events.alloc("output", output)
        events.alloc("weights", s.brgemm_weights(s.oc, s.ic))
        events.free("weights")
        return output
    # ideep books the primitive's scratchpad, reorders the source and weights, computes into a blocked destination,
    # frees the reorders and the scratchpad; mkldnn_to_dense then allocates the output and copies into it.
    events.alloc("scratchpad", _padded_bias(s) if bias else 0)
    events.alloc("src", 0 if s.first else s.activation(s.ic, s.in_hw, blocked=True))
    events.alloc("weights", s.blocked_weights())
    events.alloc("dst", s.activation(s.oc, s.out_hw, blocked=True))
    events.free("weights", "src", "scratchpad")
    events.alloc("output", output)
    events.free("dst")
    return output


def _padded_bias(s: _Shape) -> int:
    """The direct kernel's one scratchpad entry: the bias padded to the channel block (``key_conv_padded_bias``, booked
    where oc is not a multiple of 16), with the alignment slack oneDNN's registry adds to every entry."""
    if s.oc % _SIMD == 0:
        return 0
    return 4 * _rnd_up(s.oc, _SIMD) + _SCRATCHPAD_ALIGNMENT


def _backward_data(events: _Allocations, s: _Shape) -> int:
    """Conv.cpp ``mkldnn_convolution_backward_input``; returns grad_input's bytes."""
    grad_input = s.activation(s.ic, s.in_hw, blocked=False)
    if s.channels_last:
        events.alloc("grad_input", grad_input)
        events.alloc("weights", s.brgemm_weights(s.ic, s.oc))
        events.free("weights")
        return grad_input
    events.alloc("diff_dst", s.activation(s.oc, s.out_hw, blocked=True))
    events.alloc("weights", 4 * _rnd_up(s.oc, _SIMD) * _rnd_up(s.ic, _SIMD) * s.kernel)
    events.alloc("diff_src", s.activation(s.ic, s.in_hw, blocked=True))
    events.free("weights", "diff_dst")
    events.alloc("grad_input", grad_input)
    events.free("diff_src")
    return grad_input


def _backward_weights(events: _Allocations, s: _Shape, bias: bool) -> int:
    """Conv.cpp ``mkldnn_convolution_backward_weights``; returns grad_weight's and grad_bias's bytes."""
    weights = 4 * s.oc * s.ic * s.kernel
    if not s.channels_last:
        events.alloc("diff_dst", s.activation(s.oc, s.out_hw, blocked=True))
        events.alloc("src", 0 if s.first else s.activation(s.ic, s.in_hw, blocked=True))
    events.alloc("diff_weights", s.blocked_weights())
    events.alloc("diff_bias", 4 * s.oc if bias else 0)
    events.free("src", "diff_dst")
    # mkldnn_to_dense of grad_bias then grad_weight; channels-last adds .to(channels_last)
    events.alloc("grad_bias", 4 * s.oc if bias else 0)
    events.alloc("grad_weight", weights)
    if s.channels_last:
        events.alloc("grad_weight_cl", weights)
    return weights + (4 * s.oc if bias else 0)
