"""The attention backend vLLM runs for a model on a GPU, and the transformers attention that stands for it in the trace.

vLLM's backends (FlashAttention, FlashInfer, Triton) are fused kernels: none builds the score matrix, and each
takes Gemma-2's logit softcap inside the kernel. In the profile run they compute nothing at all: the dummy run
builds no attention metadata, and each backend's ``forward`` returns its output buffer when the metadata is None.
The profile is traced with transformers' ``sdpa`` (a fused kernel) where the model takes it; where it does not,
transformers' default is eager attention (Gemma-2's: "sdpa does not support softcapping"), which builds a full
float32 score matrix and the softcap's intermediates, so those models are traced with flash-attn's kernel model
(``flash_attention_2``: queries, keys, values and the output, no score matrix, the softcap in the kernel).
"""

from __future__ import annotations

import torch

from vramsim.errors import ConfigError
from vramsim.workload.targets import Target

__all__ = ["ATTENTION_BACKENDS", "engine_attention", "traced_attention"]

ATTENTION_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN")
"""vLLM's ``--attention-backend`` names modelled (``vllm/v1/attention/backends/``); each runs fused."""


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


def traced_attention(takes_sdpa: bool, dtype: torch.dtype) -> str:
    """The ``attn_implementation`` a fused backend's profile is traced with, for a model that takes ``sdpa`` or not,
    with weights in ``dtype`` (flash-attn runs half precision only: a float32 model without sdpa stays eager)."""
    if takes_sdpa:
        return "sdpa"
    return "eager" if dtype == torch.float32 else "flash_attention_2"
