"""PixArtSigmaPipeline.__call__'s tensors: one masked T5 prompt, resolution binning, a learned-sigma DiT.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
PixArt-Sigma does differently (diffusers ``pipelines/pixart_alpha/pipeline_pixart_sigma.py``): the
prompt goes through T5 alone, padded to ``max_sequence_length`` (300) with its attention mask;
``use_resolution_binning`` (on by default) generates at the aspect-ratio bin nearest the asked
size (the bins of the transformer's ``sample_size``) and resizes and crops the decoded image back;
guidance encodes the empty negative prompt and doubles the transformer's batch; the transformer
predicts noise and variance (``out_channels`` twice the latent's) and the variance half is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from vramsim.errors import ConfigError
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.prompts import guided_t5_prompt
from vramsim.workload.diffusion.spec import call_default, pipeline_class

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = [
    "PIXART_PIPELINES",
    "binned_size",
    "decode",
    "denoise",
    "encode_prompt",
    "max_sequence_length",
    "pixart_notes",
    "prompt_batch",
]

PIXART_PIPELINES = ("PixArtSigmaPipeline",)
"""The pipeline classes this module runs."""


def max_sequence_length(given: int | None) -> int:
    """The T5 prompt's padded length: as given, else the pipeline's ``__call__`` default (300)."""
    return int(call_default(PIXART_PIPELINES[0], "max_sequence_length")) if given is None else given


def prompt_batch(tokens: int) -> dict[str, torch.Tensor]:
    """The tokenized prompt on the device: ids and attention mask, padded to ``max_sequence_length``."""
    return {"input_ids": torch.zeros(1, tokens, dtype=torch.long), "attention_mask": torch.ones(1, tokens, dtype=torch.long)}


def binned_size(step: Generation, transformer: torch.nn.Module) -> tuple[int, int]:
    """``classify_height_width_bin``: the (height, width) the pipeline generates at, from the aspect-ratio bins its
    ``__call__`` picks by the transformer's ``sample_size``."""
    pipeline_class(PIXART_PIPELINES[0])  # importing its module quietly
    from diffusers.image_processor import PixArtImageProcessor
    from diffusers.pipelines.pixart_alpha import pipeline_pixart_alpha as alpha
    from diffusers.pipelines.pixart_alpha import pipeline_pixart_sigma as sigma

    bins = {
        256: sigma.ASPECT_RATIO_2048_BIN,
        128: alpha.ASPECT_RATIO_1024_BIN,
        64: alpha.ASPECT_RATIO_512_BIN,
        32: alpha.ASPECT_RATIO_256_BIN,
    }
    config: Any = transformer.config
    if config.sample_size not in bins:
        raise ConfigError(
            f"PixArtSigmaPipeline bins resolutions for a transformer sample_size of {sorted(bins)}, not {config.sample_size}"
        )
    return PixArtImageProcessor.classify_height_width_bin(step.run.height, step.run.width, ratios=bins[config.sample_size])


def pixart_notes(step: Generation, transformer: torch.nn.Module) -> list[Assumption]:
    """What the PixArt run assumes beyond the common pipeline notes."""
    height, width = binned_size(step, transformer)
    negative = " and the empty negative prompt (guidance doubles the transformer's batch)" if step.run.guidance_scale > 1 else ""
    return [
        Assumption(
            name="pixart_prompt",
            detail=f"T5's last hidden state over the prompt{negative}, padded to "
            f"max_sequence_length={step.run.max_sequence_length} with its attention mask",
        ),
        Assumption(
            name="resolution_binning",
            detail=f"use_resolution_binning (the default): generated at the nearest "
            f"aspect-ratio bin, {height}x{width}, then resized and cropped to {step.run.height}x{step.run.width}",
        ),
    ]


def _t5_embeds(step: Generation, program: Program) -> tuple[torch.Tensor, torch.Tensor]:
    """One prompt's T5 states and mask, repeated per image, as ``encode_prompt`` makes them."""
    n = step.run.num_images
    encoder: Any = program.modules["text_encoder"]
    step.use("text_encoder")
    prompt_attention_mask = program.batch["attention_mask"]
    prompt_embeds = encoder(program.batch["input_ids"], attention_mask=prompt_attention_mask)[0]
    prompt_embeds = prompt_embeds.to(dtype=encoder.dtype)
    seq_len = prompt_embeds.shape[1]
    prompt_embeds = prompt_embeds.repeat(1, n, 1)
    prompt_embeds = prompt_embeds.view(n, seq_len, -1)
    prompt_attention_mask = prompt_attention_mask.repeat(1, n)
    prompt_attention_mask = prompt_attention_mask.view(n, -1)
    return prompt_embeds, prompt_attention_mask


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt`` and ``__call__``'s concatenation (negative first); ``__call__`` keeps the negative embeddings
    as locals through the decode, so they are returned too."""
    return guided_t5_prompt(step, program, _t5_embeds)


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` at the binned size, the transformer on the doubled batch per traced step, the noise half
    of its output to the scheduler."""
    transformer: Any = program.modules["transformer"]
    vae_config: Any = program.modules["vae"].config
    prompt_embeds = embeds["encoder_hidden_states"]
    device, dtype = prompt_embeds.device, prompt_embeds.dtype
    height, width = binned_size(step, transformer)
    scale = 2 ** (len(vae_config.block_out_channels) - 1)
    scheduler = step.scheduler
    scheduler.set_timesteps(step.run.num_inference_steps, device="cpu")  # kept on the host
    latent_channels = transformer.config.in_channels
    latents = torch.randn((step.run.num_images, latent_channels, height // scale, width // scale), device=device, dtype=dtype)
    latents = latents * scheduler.init_noise_sigma
    guided = step.run.guidance_scale > 1
    step.use("transformer")
    for t in scheduler.timesteps[: step.steps_traced]:
        latent_model_input = torch.cat([latents] * 2) if guided else latents
        latent_model_input = scheduler.scale_model_input(latent_model_input, t)
        current_timestep = t[None].to(device).expand(latent_model_input.shape[0])
        noise_pred = transformer(
            latent_model_input,
            encoder_hidden_states=prompt_embeds,
            encoder_attention_mask=embeds["encoder_attention_mask"],
            timestep=current_timestep,
            added_cond_kwargs={"resolution": None, "aspect_ratio": None},
            return_dict=False,
        )[0]
        if guided:
            noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
            noise_pred = noise_pred_uncond + step.run.guidance_scale * (noise_pred_text - noise_pred_uncond)
        if transformer.config.out_channels // 2 == latent_channels:
            noise_pred = noise_pred.chunk(2, dim=1)[0]
        latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
    return latents


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """``vae.decode(latents / scaling_factor)`` (no upcast in PixArtSigmaPipeline), the binned image resized and cropped
    to the asked size, then ``postprocess``'s device part."""
    from diffusers.image_processor import PixArtImageProcessor

    vae: Any = program.modules["vae"]
    step.use("vae")
    image = vae.decode(latents.to(vae.dtype) / vae.config.scaling_factor, return_dict=False)[0]
    image = PixArtImageProcessor.resize_and_crop_tensor(image, step.run.width, step.run.height)
    processor = PixArtImageProcessor(vae_scale_factor=2 ** (len(vae.config.block_out_channels) - 1))
    return processor.postprocess(image, output_type="pt")
