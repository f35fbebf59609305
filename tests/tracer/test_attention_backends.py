"""SDPA on GPU targets: the backend torch 2.13 picks per architecture and what it saves for backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vramsim.tracer.kernels.attention import GpuAttention
from vramsim.tracer.kernels.emulation import AttentionCall
from vramsim.workload.targets import resolve_target

B, HQ, HKV, L, D = 1, 32, 8, 64, 128  # Llama-3.1-8B's heads and head dim, a short sequence


def qkv(dtype: torch.dtype, *, gqa: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(batch, heads, seq, head_dim) views of a (batch, seq, heads, head_dim) projection, as HF makes them."""
    kv_heads = HKV if gqa else HQ
    q = torch.empty(B, L, HQ, D, device="meta", dtype=dtype, requires_grad=True).transpose(1, 2)
    k = torch.empty(B, L, kv_heads, D, device="meta", dtype=dtype, requires_grad=True).transpose(1, 2)
    v = torch.empty(B, L, kv_heads, D, device="meta", dtype=dtype, requires_grad=True).transpose(1, 2)
    return q, k, v


def backend(device: str, dtype: torch.dtype, *, gqa: bool) -> str:
    q, k, v = qkv(dtype, gqa=gqa)
    return resolve_target(device).rules.attention.backend(AttentionCall(q, k, v, None, 0.0, True, None, gqa))


@pytest.mark.parametrize(
    ("device", "dtype", "gqa", "expected"),
    [
        ("a100", torch.bfloat16, True, "flash"),  # sm80: flash first; cuDNN is last in the default order
        ("h100", torch.bfloat16, True, "cudnn"),  # sm90 + cuDNN 9.20 > 9.15: cuDNN first
        ("h200", torch.float16, True, "cudnn"),
        ("b200", torch.bfloat16, True, "cudnn"),  # sm100, likewise
        ("rtx-4090", torch.bfloat16, True, "flash"),  # sm89 is not preferred for cuDNN
        ("mi300x", torch.bfloat16, True, "flash"),  # ROCm: AOTriton flash, no cuDNN
        ("t4", torch.float16, False, "efficient"),  # sm75: no flash; efficient with equal heads
        ("t4", torch.float16, True, "math"),  # ...but efficient has no grouped heads
        ("v100", torch.float16, False, "efficient"),
        ("v100", torch.float16, True, "math"),
        ("h100", torch.float32, True, "math"),  # no fused fp32 kernel takes grouped heads
        ("h100", torch.float32, False, "efficient"),
    ],
)
def test_backend_per_arch(device: str, dtype: torch.dtype, gqa: bool, expected: str) -> None:
    assert backend(device, dtype, gqa=gqa) == expected


def test_cudnn_limits_on_h100() -> None:
    """check_cudnn_tensor_shapes: head dim 256 is past cuDNN 9.20's limit; a key length of 1 is refused."""
    attention = GpuAttention(compute_capability=(9, 0))
    big = torch.empty(1, 4, 64, 256, device="meta", dtype=torch.bfloat16)
    assert attention.backend(AttentionCall(big, big, big, None, 0.0, True, None, False)) == "flash"
    q = torch.empty(1, 4, 1, 64, device="meta", dtype=torch.bfloat16)
    kv = torch.empty(1, 4, 1, 64, device="meta", dtype=torch.bfloat16)
    assert attention.backend(AttentionCall(q, kv, kv, None, 0.0, False, None, False)) == "flash"
    assert attention.prefers_cudnn() and not GpuAttention(compute_capability=(8, 0)).prefers_cudnn()


def saved_bytes(device: str, dtype: torch.dtype, *, gqa: bool) -> int:
    """Bytes of the tensors autograd saves for SDPA's backward beyond q, k and v themselves."""
    q, k, v = qkv(dtype, gqa=gqa)
    inputs = {id(t.untyped_storage()) for t in (q, k, v)}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if id(storage) not in inputs:
            saved[id(storage)] = storage.nbytes()
        return tensor

    target = resolve_target(device)
    with target.emulation(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    return sum(saved.values())


def test_saved_bytes_per_backend() -> None:
    """cuDNN: output, fp32 stats (batch, heads, seq, 1), int64 seed and offset; flash: output, fp32
    logsumexp, a 2-word rng state and offset; efficient: output, logsumexp, seed, offset; math saves
    the attention probabilities."""
    out = B * HQ * L * D * 2
    lse = B * HQ * L * 4
    assert saved_bytes("h100", torch.bfloat16, gqa=True) == out + lse + 8 + 8
    assert saved_bytes("b200", torch.bfloat16, gqa=True) == out + lse + 8 + 8
    assert saved_bytes("a100", torch.bfloat16, gqa=True) == out + lse + 16 + 8
    assert saved_bytes("mi300x", torch.bfloat16, gqa=True) == out + lse + 16 + 8
    assert saved_bytes("t4", torch.float16, gqa=False) == out + lse + 8 + 8
    assert saved_bytes("v100", torch.float16, gqa=True) >= B * HQ * L * L * 2  # math: (seq, seq) probabilities


def test_efficient_pads_unaligned_mask() -> None:
    """attention.cpp preprocess_mask: a (batch, 1, L, 60) mask is copied into a last dim of 64 and saved."""
    q = torch.empty(2, 4, 60, 64, device="meta", dtype=torch.float32, requires_grad=True)
    mask = torch.empty(2, 1, 60, 60, device="meta", dtype=torch.bool)
    saved: list[torch.Tensor] = []
    hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t)
    with resolve_target("a100").emulation(), hooks:
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    bias = [t for t in saved if t.dim() == 4 and t.stride(1) == 0]  # the mask, expanded over heads
    assert bias[0].shape == (2, 4, 60, 60) and bias[0].untyped_storage().nbytes() == 2 * 1 * 60 * 64 * 4
    saved.clear()
    aligned = torch.empty(2, 1, 64, 64, device="meta", dtype=torch.bool)
    q64 = torch.empty(2, 4, 64, 64, device="meta", dtype=torch.float32, requires_grad=True)
    with resolve_target("a100").emulation(), hooks:
        F.scaled_dot_product_attention(q64, q64, q64, attn_mask=aligned)
    bias = [t for t in saved if t.dim() == 4 and t.stride(1) == 0]  # the mask, expanded over heads
    assert len(bias) == 1 and bias[0].untyped_storage().nbytes() == 2 * 64 * 64 * 4  # aligned: converted, not padded
