"""The attention kernel transformers runs (``attn_implementation``): where it can run, and its stand-in on meta."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from vramsim.errors import UnsupportedError
from vramsim.estimators.devices import DeviceProfile
from vramsim.results.report import Assumption
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.tracer.kernels.flash_attn import FLASH_FUNCTIONS
from vramsim.tracer.patches import flash_attn_installed

__all__ = ["attention_in_force", "attention_notes", "attention_stand_in", "check_attention"]

FLASH_ATTENTION_2_MIN_CAPABILITY = (8, 0)
"""flash-attn's README: FlashAttention-2 needs "Ampere, Ada, or Hopper GPUs" (setup.py builds sm80,
sm90, sm100, sm120); Turing and Volta are not supported."""

FLASH_ATTENTION_3_CAPABILITY = (9, 0)
"""flash-attn's README: FlashAttention-3 "is optimized for Hopper GPUs", "Requirements: H100 / H800"."""


def check_attention(name: str | None, profile: DeviceProfile) -> None:
    """Refuse, in one line, an implementation the target cannot run or vramsim cannot trace."""
    if name not in FLASH_FUNCTIONS:
        return
    if profile.vendor != "nvidia" or profile.compute_capability is None:
        where = "the CPU" if profile.vendor == "cpu" else f"{profile.label} (ROCm builds of flash-attn are not modelled)"
        raise UnsupportedError(f"attn_implementation={name!r} is flash-attn's CUDA kernel; it does not run on {where}")
    capability = profile.compute_capability
    if name == "flash_attention_2" and capability < FLASH_ATTENTION_2_MIN_CAPABILITY:
        raise UnsupportedError(
            f"flash_attention_2 needs compute capability 8.0 or newer (Ampere+); {profile.label} is "
            f"sm{capability[0]}{capability[1]}: use sdpa or eager"
        )
    if name == "flash_attention_3" and capability != FLASH_ATTENTION_3_CAPABILITY:
        raise UnsupportedError(
            f"flash_attention_3 runs on Hopper (sm90); {profile.label} is sm{capability[0]}{capability[1]}: "
            "use flash_attention_2 or sdpa"
        )


def attention_stand_in(name: str | None, emulation: KernelEmulation) -> contextlib.AbstractContextManager[Any]:
    """While building and tracing: flash-attn's functions replaced by their meta stand-ins, under
    ``emulation``'s autocast."""
    if name not in FLASH_FUNCTIONS:
        return contextlib.nullcontext()
    return flash_attn_installed(FLASH_FUNCTIONS[name], emulation.autocast_dtype)


def attention_in_force(modules: dict[str, torch.nn.Module]) -> str | None:
    """The implementation transformers chose for the (first) model: the requested one, or its default."""
    for module in modules.values():
        config = getattr(module, "config", None)
        chosen = getattr(config, "_attn_implementation", None)
        if isinstance(chosen, str):
            return chosen
    return None


def attention_notes(name: str | None) -> tuple[Assumption, ...]:
    """What a flash-attn prediction rests on: its source, and what of it is not counted."""
    if name not in FLASH_FUNCTIONS:
        return ()
    detail = (
        f"{name} is flash-attn 2.8.4's Python layer on stand-in kernels allocating what its CUDA code allocates "
        "(tracer/kernels/flash_attn.py); not counted: FA2's split-KV forward accumulators and FA3's scheduler "
        "semaphore; the backward is the non-deterministic one"
    )
    return (Assumption(name="flash_attn", detail=detail),)
