"""The attention backend vLLM runs in its profile run, and the transformers attention that stands for it there.

vLLM's backends (FlashAttention, FlashInfer, Triton) are fused kernels: none builds the score matrix, and each
takes Gemma-2's logit softcap inside the kernel. In the profile run they compute nothing at all: the dummy run
builds no attention metadata (``_dummy_run`` builds it only to capture a full CUDA graph), and each backend's
``forward`` returns its output buffer, zeroed, when the metadata is None (``FlashAttentionImpl.forward``: "Profiling
run"); no mask is built either. transformers' default for some models is eager attention (Gemma-2's, gpt-oss's),
which builds a full float32 score matrix and the softcap's intermediates, so the profile is traced with an attention
function registered here that does what vLLM's backends do in that run: the output buffer, nothing else.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, AttentionMaskInterface

from vramsim.errors import ConfigError
from vramsim.workload.targets import Target

__all__ = ["ATTENTION_BACKENDS", "PROFILE_ATTENTION", "engine_attention", "use_profile_attention"]

ATTENTION_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN")
"""vLLM's ``--attention-backend`` names modelled (``vllm/v1/attention/backends/``); each runs fused."""

PROFILE_ATTENTION = "vllm_profile_run"
"""The name the profile-run attention is registered under in transformers' ``AttentionInterface``."""


def engine_attention(target: Target, backend: str | None) -> str:
    """The backend vLLM selects on ``target`` when none is given (``CudaPlatform.get_attn_backend_cls``: FlashAttention
    on compute capability 8.0 and newer, Triton below it and on ROCm), else the one given, checked."""
    if backend is None:
        capability = target.profile.compute_capability
        nvidia = target.profile.vendor == "nvidia"
        return "FLASH_ATTN" if nvidia and capability is not None and capability >= (8, 0) else "TRITON_ATTN"
    name = backend.upper()
    if name not in ATTENTION_BACKENDS:
        raise ConfigError(f"unknown attention_backend {backend!r}; choose one of: {', '.join(ATTENTION_BACKENDS)}")
    return name


def _profile_attention(
    module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any
) -> tuple[torch.Tensor, None]:
    """A backend's forward without metadata: its output buffer, zeroed. ``query`` is (batch, heads, tokens, head_dim);
    the output (batch, tokens, heads, value head_dim), as transformers' attention functions return it."""
    batch, heads, tokens, _ = query.shape
    return query.new_zeros(batch, tokens, heads, value.shape[-1]), None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """vLLM's profile run builds no attention mask."""
    return None


def use_profile_attention(model: torch.nn.Module) -> None:
    """Run ``model``'s attention layers as vLLM's backends run in the profile run (registered once, then selected)."""
    AttentionInterface.register(PROFILE_ATTENTION, _profile_attention)
    AttentionMaskInterface.register(PROFILE_ATTENTION, _no_mask)
    config = getattr(model, "config", None)
    if config is not None:
        config._attn_implementation = PROFILE_ATTENTION
