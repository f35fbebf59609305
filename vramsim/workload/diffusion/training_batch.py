"""The batch of a pipeline's training step: pixels (or cached latents) and the prompt's tokens (or cached embeddings)."""

from __future__ import annotations

from typing import Any

import torch

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError
from vramsim.workload.diffusion import flux
from vramsim.workload.diffusion.components import vae_config, vae_scale
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.diffusion.training_step import Recipe
from vramsim.workload.models import load_config

__all__ = ["training_batch", "training_resolution"]


def training_batch(
    spec: PipelineSpec,
    recipe: Recipe,
    config: SimulationConfig,
    device: str,
    denoiser: torch.nn.Module,
    weight_dtype: torch.dtype,
) -> dict[str, Any]:
    """The pixel batch in fp32 as the scripts' collate makes it (or its cached latent distribution, in the VAE's dtype),
    and the prompt's token ids padded to the tokenizers' lengths (or its cached embeddings)."""
    from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

    scale = vae_scale(spec)
    height, width = training_resolution(spec, config, denoiser)
    n = config.batch_size
    t5_tokens = _t5_tokens(spec, recipe, config, denoiser)
    batch: dict[str, Any] = {}
    with torch.device(device):
        if config.cache_latents:  # the script's latents_cache: vae.encode(pixel_values).latent_dist, kept on the device
            channels = 2 * vae_config(spec)["latent_channels"]
            vae_dtype = torch.float32 if recipe.vae_fp32 else weight_dtype
            parameters = torch.randn(n, channels, height // scale, width // scale, dtype=vae_dtype)
            dist = DiagonalGaussianDistribution(parameters)
            batch["latent_dist"] = dist  # its tensors too, at the top level, where the program's inputs are marked
            batch |= {f"latent_dist.{name}": value for name, value in vars(dist).items() if isinstance(value, torch.Tensor)}
        else:
            batch["pixel_values"] = torch.randn(n, 3, height, width)
        if config.cache_text_embeddings:
            batch.update(_cached_embeddings(spec, weight_dtype, t5_tokens))
        else:
            batch["input_ids"] = torch.zeros(n, spec.max_tokens("tokenizer"), dtype=torch.long)
            if t5_tokens:
                batch["t5_input_ids"] = torch.zeros(n, t5_tokens, dtype=torch.long)
    return batch


def _t5_tokens(spec: PipelineSpec, recipe: Recipe, config: SimulationConfig, denoiser: torch.nn.Module) -> int:
    """T5's prompt tokens: FLUX's pipeline default (512, schnell's 256), the SD3 scripts' 77, as given; 0 without T5."""
    if spec.class_name in flux.FLUX_PIPELINES:
        return flux.max_sequence_length(denoiser, config.max_sequence_length)
    script_default = recipe.max_sequence_length
    if script_default is None:
        if config.max_sequence_length is not None:
            raise ConfigError(f"max_sequence_length pads a T5 prompt; {spec.class_name} has no T5 text encoder")
        return 0
    return config.max_sequence_length or script_default


def training_resolution(spec: PipelineSpec, config: SimulationConfig, denoiser: torch.nn.Module) -> tuple[int, int]:
    """``--resolution``: as given, else the denoiser's default sample size times the VAE's scale (1024 for SDXL and FLUX)."""
    denoiser_config: Any = denoiser.config
    sample = flux.DEFAULT_SAMPLE_SIZE if spec.class_name in flux.FLUX_PIPELINES else denoiser_config.sample_size
    scale = vae_scale(spec)
    return config.height or sample * scale, config.width or sample * scale


def _cached_embeddings(spec: PipelineSpec, dtype: torch.dtype, t5_tokens: int) -> dict[str, torch.Tensor]:
    """The prompt's embeddings as the scripts precompute them once (for one prompt), each named ``cached_<key>``."""
    tokens = spec.max_tokens("tokenizer")
    encoders = [
        load_config(spec.component(name)) for name in ("text_encoder", "text_encoder_2", "text_encoder_3") if spec.has(name)
    ]
    if len(encoders) == 3:  # SD3: both CLIPs' states padded to T5's width, then T5's tokens; both projections
        clip_l, clip_g, t5 = encoders
        pooled = clip_l.projection_dim + clip_g.projection_dim
        return {
            "cached_encoder_hidden_states": torch.zeros(1, tokens + t5_tokens, t5.d_model, dtype=dtype),
            "cached_pooled_projections": torch.zeros(1, pooled, dtype=dtype),
        }
    if t5_tokens:
        clip, t5 = encoders
        return {
            "cached_encoder_hidden_states": torch.zeros(1, t5_tokens, t5.d_model, dtype=dtype),
            "cached_pooled_projections": torch.zeros(1, clip.hidden_size, dtype=dtype),
            "cached_txt_ids": torch.zeros(t5_tokens, 3, dtype=dtype),
        }
    if len(encoders) == 1:
        return {"cached_encoder_hidden_states": torch.zeros(1, tokens, encoders[0].hidden_size, dtype=dtype)}
    hidden = sum(encoder.hidden_size for encoder in encoders)
    return {
        "cached_encoder_hidden_states": torch.zeros(1, tokens, hidden, dtype=dtype),
        "cached_text_embeds": torch.zeros(1, encoders[-1].projection_dim, dtype=dtype),
    }
