"""A pipeline's attention as configured: sdpa (the pipelines' default), eager (scores materialised), or sliced."""

from __future__ import annotations

from typing import Any

import torch

from vramsim.config import SimulationConfig
from vramsim.config.diffusion import attention_processors
from vramsim.errors import ConfigError, UnsupportedError, first_line
from vramsim.workload.diffusion.spec import PipelineSpec

__all__ = ["eager_attention", "set_attention_processors", "set_eager_attention", "slice_attention"]


def eager_attention(spec: PipelineSpec, config: SimulationConfig) -> bool:
    """``attn_implementation``: ``sdpa`` (the pipelines' default) or ``eager`` (``set_eager_attention``); the others
    are refused."""
    if config.attn_implementation in (None, "sdpa"):
        return False
    if config.attn_implementation != "eager":
        raise UnsupportedError(
            f"{spec.class_name}: attn_implementation={config.attn_implementation!r} is not modelled "
            "for pipelines (sdpa, their default, and eager are)"
        )
    return True


def set_eager_attention(spec: PipelineSpec, denoisers: list[Any], vae: Any) -> None:
    """Attention with its scores materialised, besides the text encoders' own eager attention: diffusers' classic
    ``AttnProcessor`` (``baddbmm``, softmax, ``bmm``) in place of ``AttnProcessor2_0`` (UNets, PixArt, the VAEs),
    as ``set_attn_processor(AttnProcessor())`` sets it; where the processors go through diffusers' dispatcher
    (FLUX, Wan), its ``_native_math`` backend (SDPA's math kernel), as ``set_attention_backend("_native_math")``
    sets it. Other processors (SD3's joint attention) have no eager form here: refused."""
    from diffusers.models.attention_processor import AttnProcessor

    for model in (*denoisers, vae):
        processors = list(getattr(model, "attn_processors", {}).values())
        if processors and all(type(p).__name__ == "AttnProcessor2_0" for p in processors):
            model.set_attn_processor(AttnProcessor())
        elif processors and all(hasattr(p, "_attention_backend") for p in processors):
            _set_model_attention_backend(model, "_native_math")
        elif processors or model is not vae:
            kinds = ", ".join(sorted({type(p).__name__ for p in processors})) or "its own attention"
            raise UnsupportedError(
                f"{spec.class_name}: attn_implementation='eager' is not modelled for {type(model).__name__} "
                f"({kinds}); sdpa, the default, is"
            )
        # a model with no attention processors (Wan's VAE) keeps its attention


def _set_model_attention_backend(model: Any, backend: str) -> None:
    """``set_attention_backend`` on one model: each processor keeps the backend it is given, but diffusers also
    makes it the process's active backend (``_AttentionBackendRegistry``), which would change every pipeline
    simulated after this one in the same process; that one is put back."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    from vramsim.workload.quiet import quiet_attention_backend

    active = _AttentionBackendRegistry._active_backend
    try:
        with quiet_attention_backend():
            model.set_attention_backend(backend)
    finally:
        _AttentionBackendRegistry.set_active_backend(active)


def slice_attention(spec: PipelineSpec, modules: dict[str, torch.nn.Module], slicing: str) -> None:
    """``pipe.enable_attention_slicing(slice_size)``: every component with ``set_attention_slice`` (a UNet) computes
    its attention a slice of heads at a time (diffusers' ``SlicedAttnProcessor``)."""
    size: str | int = int(slicing) if slicing.isdigit() else slicing
    sliced: list[Any] = [m for m in modules.values() if hasattr(m, "set_attention_slice")]
    if not sliced:
        raise UnsupportedError(
            f"{spec.class_name} has no component that slices its attention (diffusers' "
            "set_attention_slice is a UNet's); attention_slicing applies to SD 1.5 and SDXL"
        )
    for model in sliced:
        try:
            model.set_attention_slice(size)
        except ValueError as exc:  # a size larger than a layer's heads, as diffusers checks it
            raise ConfigError(f"attention_slicing={slicing}", quoted=first_line(exc)) from None


def set_attention_processors(spec: PipelineSpec, modules: dict[str, torch.nn.Module], text: str) -> None:
    """``attention_processor``: ``modules[component].set_attn_processor(NAME())`` for each pair, on a component
    whose processors are diffusers' classic ``Attention`` ones (``AttnProcessor`` or ``AttnProcessor2_0``), which
    take either."""
    from diffusers.models import attention_processor

    for component, name in attention_processors(text).items():
        model: Any = modules.get(component)
        if model is None:
            raise ConfigError(f"attention_processor: {spec.class_name} has no component {component!r} ({', '.join(modules)})")
        kinds = {type(p).__name__ for p in getattr(model, "attn_processors", {}).values()}
        if not kinds or not kinds <= {"AttnProcessor", "AttnProcessor2_0"}:
            raise UnsupportedError(
                f"attention_processor: {spec.class_name}'s {component} runs "
                f"{', '.join(sorted(kinds)) or 'no diffusers attention processor'}; AttnProcessor and AttnProcessor2_0 "
                "are set on components whose attention is diffusers' classic Attention (UNets, VAEs, PixArt)"
            )
        model.set_attn_processor(getattr(attention_processor, name)())
