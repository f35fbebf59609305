"""flash-attn's kernels as transformers calls them, allocating on meta what the CUDA kernels allocate.

flash-attn is a CUDA extension that cannot run on meta tensors. Its Python layer is small: an
``autograd.Function`` per entry point around one forward and one backward op. This module keeps
that layer (what it pads, what it saves, what it allocates for backward) and replaces each op
with one whose meta kernel allocates exactly the tensors the op returns; buffers the C++ frees
before returning are the target's workspaces (``flash_attn_workspaces``).

Read at Dao-AILab/flash-attention commit 0251105a (flash_attn 2.8.4): FlashAttention-2 is
``flash_attn/flash_attn_interface.py`` and ``csrc/flash_attn/flash_api.cpp``; FlashAttention-3
is ``hopper/flash_attn_interface.py`` and ``hopper/flash_api.cpp``.

Known limitations: the padded-batch (varlen) entry points are not modelled; FA2's split-KV
forward accumulators (inference with few query blocks; they depend on the SM count) and FA3's
scheduler semaphore (a few int32) are not counted; backward is the non-deterministic one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import register_flop_formula, sdpa_backward_flop_count, sdpa_flop_count

from vramsim.errors import ConfigError, UnsupportedError

__all__ = ["FLASH_FUNCTIONS", "flash_attn_workspaces"]


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


# -- FlashAttention-2 ----------------------------------------------------------------------------


@torch.library.custom_op("vramsim_flash_attn::fa2_forward", mutates_args=(), device_types="meta")
def _fa2_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """flash_api.cpp ``mha_fwd``: ``out`` like q, ``softmax_lse`` (batch, heads, seq_q) in float32,
    ``rng_state`` (2,) int64; ``p`` is empty unless the caller asks for the probabilities."""
    batch, seq_q, heads, _ = q.shape  # (batch, seq, heads, head_dim)
    out = torch.empty_like(q)
    softmax_lse = torch.empty((batch, heads, seq_q), dtype=torch.float32, device=q.device)
    rng_state = torch.empty((2,), dtype=torch.int64, device=q.device)
    return out, softmax_lse, rng_state


@torch.library.custom_op("vramsim_flash_attn::fa2_backward", mutates_args=("dq", "dk", "dv"), device_types="meta")
def _fa2_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    softmax_lse: torch.Tensor,
    dq: torch.Tensor,
    dk: torch.Tensor,
    dv: torch.Tensor,
) -> torch.Tensor:
    """flash_api.cpp ``mha_bwd`` fills dq, dk, dv and returns ``softmax_d`` (batch, heads, seq_q
    rounded to 128) in float32; ``dq_accum`` and the GQA expansions are its workspaces."""
    batch, seq_q, heads, _ = q.shape
    return torch.empty((batch, heads, _round_up(seq_q, 128)), dtype=torch.float32, device=q.device)


def fa2_backward_workspace(args: tuple[Any, ...]) -> int:
    """``mha_bwd``'s buffers, live together and freed before it returns: ``dq_accum`` (batch, seq_q
    rounded to 128, heads, head dim rounded to 32, or 64 above 128) in float32, and with
    grouped-query attention ``dk_expanded`` / ``dv_expanded`` (batch, seq_k, heads, head dim) in
    the input dtype."""
    q, k = args[1], args[2]
    batch, seq_q, heads, head_dim = q.shape
    seq_k, heads_k = k.shape[1], k.shape[2]
    rounded = _round_up(head_dim, 32 if head_dim <= 128 else 64)
    dq_accum = batch * _round_up(seq_q, 128) * heads * rounded * 4
    expanded = 2 * batch * seq_k * heads * head_dim * q.element_size() if heads_k != heads else 0
    return dq_accum + expanded


class _Fa2Function(torch.autograd.Function):
    """flash_attn_interface.py ``FlashAttnFunc``: pads head dims to a multiple of 8, saves q, k, v,
    the padded output, ``softmax_lse`` and ``rng_state``; backward allocates dq, dk, dv like q, k, v."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_grad: bool) -> torch.Tensor:
        head_dim = q.shape[-1]
        if head_dim % 8:
            q, k, v = (F.pad(t, [0, 8 - head_dim % 8]) for t in (q, k, v))
        out_padded, softmax_lse, rng_state = _fa2_forward(q, k, v)
        if is_grad:
            ctx.save_for_backward(q, k, v, out_padded, softmax_lse, rng_state)
        return out_padded[..., :head_dim]

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, softmax_lse, _rng_state = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        head_dim = dout.shape[-1]
        dout_padded = F.pad(dout, [0, 8 - head_dim % 8]) if head_dim % 8 else dout
        _fa2_backward(dout_padded, q, k, v, out, softmax_lse, dq, dk, dv)
        return dq[..., :head_dim], dk[..., :head_dim], dv[..., :head_dim], None


def fa2_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
) -> torch.Tensor:
    """``flash_attn.flash_attn_func``'s signature (transformers reads it to pick its arguments)."""
    _check_dtype(q, "flash_attention_2")
    return _Fa2Function.apply(q, k, v, torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)))


def fa2_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: Any,
    max_seqlen_k: Any,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: Any = None,
) -> torch.Tensor:
    """``flash_attn.flash_attn_varlen_func``'s signature: padded or packed batches, not modelled."""
    raise _varlen_unsupported("flash_attention_2")


# -- FlashAttention-3 (Hopper) -------------------------------------------------------------------


@torch.library.custom_op("vramsim_flash_attn::fa3_forward", mutates_args=(), device_types="meta")
def _fa3_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """hopper/flash_api.cpp ``mha_fwd`` with one split: ``out`` a new contiguous (batch, seq_q,
    heads, head_dim_v) tensor and ``softmax_lse`` (batch, heads, seq_q) in float32."""
    batch, seq_q, heads, _ = q.shape
    out = torch.empty((batch, seq_q, heads, v.shape[-1]), dtype=q.dtype, device=q.device)
    softmax_lse = torch.empty((batch, heads, seq_q), dtype=torch.float32, device=q.device)
    return out, softmax_lse


@torch.library.custom_op("vramsim_flash_attn::fa3_backward", mutates_args=("dq", "dk", "dv"), device_types="meta")
def _fa3_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    softmax_lse: torch.Tensor,
    dq: torch.Tensor,
    dk: torch.Tensor,
    dv: torch.Tensor,
    causal: bool,
    local: bool,
    softcap: float,
) -> list[torch.Tensor]:
    """hopper/flash_api.cpp ``mha_bwd`` returns ``softmax_d`` and ``softmax_lse_log2`` (batch, heads,
    seq_q rounded to kBlockM), ``dq_accum`` (batch, heads, that * head dim rounded) and, with
    grouped-query attention, ``dk_accum`` / ``dv_accum`` (batch, kv heads, seq_k rounded to kBlockN
    * head dim rounded), all float32."""
    batch, seq_q, heads, head_dim = q.shape
    seq_k, heads_k = k.shape[1], k.shape[2]
    rounded = _fa3_head_dim(max(head_dim, v.shape[-1]))
    block_m, block_n = _fa3_backward_blocks(rounded, causal, local, softcap)
    seq_q_rounded, seq_k_rounded = _round_up(seq_q, block_m), _round_up(seq_k, block_n)
    shapes = [(batch, heads, seq_q_rounded), (batch, heads, seq_q_rounded), (batch, heads, seq_q_rounded * rounded)]
    if heads_k != heads:
        shapes += [(batch, heads_k, seq_k_rounded * rounded)] * 2
    return [torch.empty(shape, dtype=torch.float32, device=q.device) for shape in shapes]


def _fa3_head_dim(head_dim: int) -> int:
    """hopper/flash_api.cpp ``round_up_headdim``: 64, 96, 128, 192 or 256."""
    return next(size for size in (64, 96, 128, 192, 256) if head_dim <= size) if head_dim <= 256 else 256


def _fa3_backward_blocks(rounded: int, causal: bool, local: bool, softcap: float) -> tuple[int, int]:
    """``mha_bwd``'s sm90 ``kBlockM`` and ``kBlockN``, which "must match the kernel configs"."""
    if rounded <= 64:
        block_m = 96 if causal and softcap > 0 else 128
    elif rounded <= 96:
        block_m = 64
    elif rounded <= 128:
        block_m = 64 if causal or local or softcap > 0 else 80
    else:
        block_m = 64
    block_n = 128 if rounded <= 128 else 96 if rounded <= 192 else 80
    return block_m, block_n


def fa3_backward_workspace(args: tuple[Any, ...]) -> int:
    """``mha_bwd``'s ``dq_semaphore``: int32 (seq_q / kBlockM, batch, heads), freed when it returns."""
    q, v = args[1], args[3]
    causal, local, softcap = args[9], args[10], args[11]
    batch, seq_q, heads, head_dim = q.shape
    block_m, _ = _fa3_backward_blocks(_fa3_head_dim(max(head_dim, v.shape[-1])), causal, local, softcap)
    return -(-seq_q // block_m) * batch * heads * 4


class _Fa3Function(torch.autograd.Function):
    """hopper/flash_attn_interface.py ``FlashAttnFunc``: saves q, k, v, out and ``softmax_lse``;
    backward allocates dq, dk, dv like q, k, v."""

    @staticmethod
    def forward(
        ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, local: bool, softcap: float
    ) -> torch.Tensor:
        out, softmax_lse = _fa3_forward(q, k, v)
        ctx.save_for_backward(q, k, v, out, softmax_lse)
        ctx.flags = (causal, local, softcap)
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, softmax_lse = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _fa3_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, *ctx.flags)
        return dq, dk, dv, None, None, None


def fa3_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
    qv: Any = None,
    q_descale: Any = None,
    k_descale: Any = None,
    v_descale: Any = None,
    window_size: tuple[int, int] = (-1, -1),
    attention_chunk: int = 0,
    softcap: float = 0.0,
    num_splits: int = 1,
    pack_gqa: Any = None,
    deterministic: bool = False,
    sm_margin: int = 0,
    return_attn_probs: bool = False,
) -> torch.Tensor:
    """``flash_attn_interface.flash_attn_func``'s signature (FlashAttention-3)."""
    _check_dtype(q, "flash_attention_3")
    local = (window_size[0] >= 0 or window_size[1] >= 0) and not causal
    return _Fa3Function.apply(q, k, v, causal, local, softcap)


def fa3_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: Any,
    max_seqlen_k: Any,
    seqused_q: Any = None,
    seqused_k: Any = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    qv: Any = None,
    q_descale: Any = None,
    k_descale: Any = None,
    v_descale: Any = None,
    window_size: tuple[int, int] = (-1, -1),
    attention_chunk: int = 0,
    softcap: float = 0.0,
    num_splits: int = 1,
    pack_gqa: Any = None,
    deterministic: bool = False,
    sm_margin: int = 0,
    return_attn_probs: bool = False,
) -> torch.Tensor:
    """``flash_attn_interface.flash_attn_varlen_func``'s signature: not modelled."""
    raise _varlen_unsupported("flash_attention_3")


# -- shared --------------------------------------------------------------------------------------


def _check_dtype(q: torch.Tensor, name: str) -> None:
    """flash_api.cpp: "FlashAttention only support fp16 and bf16 data type"."""
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise ConfigError(
            f"{name} runs fp16/bf16 only and the attention inputs are {str(q.dtype).removeprefix('torch.')} "
            "(flash-attn: 'FlashAttention only support fp16 and bf16 data type'); pass --dtype bf16 or --mixed-precision bf16"
        )


def _varlen_unsupported(name: str) -> UnsupportedError:
    return UnsupportedError(
        f"{name} with a padded or packed batch (flash-attn's varlen path) is not modelled; give batches without padding"
    )


FLASH_FUNCTIONS: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "flash_attention_2": (fa2_func, fa2_varlen_func),
    "flash_attention_3": (fa3_func, fa3_varlen_func),
}
"""transformers' implementation name -> the stand-ins of ``flash_attn_func`` and ``flash_attn_varlen_func``."""

_FA2_BACKWARD = torch.ops.vramsim_flash_attn.fa2_backward.default
_FA3_BACKWARD = torch.ops.vramsim_flash_attn.fa3_backward.default


def _heads_first(shape: tuple[int, ...]) -> tuple[int, ...]:
    """flash-attn's (batch, seq, heads, head_dim) as SDPA's (batch, heads, seq, head_dim)."""
    batch, seq, heads, head_dim = shape
    return batch, heads, seq, head_dim


@register_flop_formula([torch.ops.vramsim_flash_attn.fa2_forward, torch.ops.vramsim_flash_attn.fa3_forward])
def _forward_flops(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...], *_: Any, **__: Any) -> int:
    """The stand-ins' FLOPs, as torch's flop counter counts its own flash kernels (``OpRecord.flops``)."""
    return sdpa_flop_count(_heads_first(q), _heads_first(k), _heads_first(v))


@register_flop_formula([_FA2_BACKWARD.overloadpacket, _FA3_BACKWARD.overloadpacket])
def _backward_flops(dout: tuple[int, ...], q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...], *_: Any, **__: Any) -> int:
    return sdpa_backward_flop_count(_heads_first(dout), _heads_first(q), _heads_first(k), _heads_first(v))


def flash_attn_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """``KernelRules.workspaces`` for the flash-attn stand-ins' backward ops."""
    if func is _FA2_BACKWARD:
        return [fa2_backward_workspace(args)]
    if func is _FA3_BACKWARD:
        return [fa3_backward_workspace(args)]
    return []
