"""LTXPipeline.__call__'s tensors: a T5 prompt with its mask, packed fp32 video latents, a timestep-aware decode.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
LTX-Video text-to-video does differently (diffusers ``pipelines/ltx/pipeline_ltx.py``): T5 runs on
the prompt padded to ``max_sequence_length`` (128) without a mask, and the mask (bool) goes to the
transformer; guidance encodes the empty negative prompt and doubles the transformer's batch; the
fp32 latents of ``(num_frames - 1) / 8 + 1`` frames of ``height / 32 x width / 32`` are packed into
tokens (the VAE patchifies, the transformer's patch is 1), the flow-matching sigmas are shifted by the
video's token count; the prediction is upcast to fp32 each step. The latents are unpacked,
de-normalized with the VAE's per-channel statistics and, for a timestep-conditioned VAE (0.9.1 and
later), mixed with fresh noise at ``decode_timestep`` before ``vae.decode(latents, timestep)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.flux import shifted_timesteps
from vramsim.workload.diffusion.prompts import guided_t5_prompt
from vramsim.workload.diffusion.spec import call_default, diffusers_version, pipeline_class
from vramsim.workload.diffusion.video import postprocess_video

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = ["LTX_PIPELINES", "decode", "default_size", "denoise", "encode_prompt", "ltx_notes", "num_frames", "prompt_batch"]

LTX_PIPELINES = ("LTXPipeline",)
"""The pipeline classes this module runs."""


def _default(argument: str) -> Any:
    """LTXPipeline.__call__'s default for ``argument``."""
    return call_default(LTX_PIPELINES[0], argument)


def default_size() -> tuple[int, int]:
    """LTXPipeline.__call__'s own height and width defaults (512x704): it does not derive them from a sample size."""
    return int(_default("height")), int(_default("width"))


def num_frames(given: int | None) -> int:
    """Frames as given, else ``__call__``'s default (161); the pipeline does not round them (the latents hold
    ``(num_frames - 1) // 8 + 1`` frames)."""
    return int(_default("num_frames")) if given is None else given


def prompt_batch(tokens: int) -> dict[str, torch.Tensor]:
    """The tokenized prompt on the device: the ids and the mask ``_get_t5_prompt_embeds`` moves there as bool."""
    return {"input_ids": torch.zeros(1, tokens, dtype=torch.long), "attention_mask": torch.ones(1, tokens, dtype=torch.bool)}


def ltx_notes(step: Generation, vae: torch.nn.Module) -> list[Assumption]:
    """What the LTX run assumes beyond the common pipeline notes."""
    guidance = (
        "guidance encodes the empty negative prompt and doubles the transformer's batch"
        if step.run.guidance_scale > 1
        else "no guidance: the transformer's batch is the prompt's"
    )
    vae_config: Any = vae.config
    if vae_config.timestep_conditioning:
        decode = (
            f"the VAE is timestep-conditioned: the latents are mixed with fresh noise at decode_timestep="
            f"{_default('decode_timestep')} (decode_noise_scale={_default('decode_noise_scale')}, __call__'s "
            "defaults; their values do not change the memory) and decoded with that timestep"
        )
    else:
        decode = "the VAE takes no timestep (timestep_conditioning false): the latents are decoded as they are"
    return [
        Assumption(
            name="ltx_video",
            detail=f"{step.run.num_frames} frames at {step.run.height}x{step.run.width}; T5 "
            f"over max_sequence_length={step.run.max_sequence_length} tokens, its mask to the transformer; "
            f"{guidance}; {decode}",
        )
    ]


def _t5_embeds(step: Generation, program: Program) -> tuple[torch.Tensor, torch.Tensor]:
    """``_get_t5_prompt_embeds``: T5's last hidden state (no mask given to T5), repeated per video, and the mask."""
    n = step.run.num_images
    encoder: Any = program.modules["text_encoder"]
    step.use("text_encoder")
    ids, prompt_attention_mask = program.batch["input_ids"], program.batch["attention_mask"]
    prompt_embeds = encoder(ids)[0]
    prompt_embeds = prompt_embeds.to(dtype=encoder.dtype)
    _, seq_len, _ = prompt_embeds.shape
    prompt_embeds = prompt_embeds.repeat(1, n, 1)
    prompt_embeds = prompt_embeds.view(n, seq_len, -1)
    prompt_attention_mask = prompt_attention_mask.view(1, -1)
    prompt_attention_mask = prompt_attention_mask.repeat(n, 1)
    return prompt_embeds, prompt_attention_mask


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt`` and ``__call__``'s concatenation (negative first); ``__call__`` keeps the negative embeddings
    as locals to the end, so they are returned too."""
    return guided_t5_prompt(step, program, _t5_embeds)


def _latent_shape(step: Generation, program: Program) -> tuple[int, int, int]:
    """(frames, height, width) of the latents, as ``__call__`` derives them; sizes the pipeline refuses are one line."""
    vae: Any = program.modules["vae"]
    if step.run.height % 32 or step.run.width % 32:
        raise ConfigError(f"LTXPipeline needs height and width divisible by 32, got {step.run.height}x{step.run.width}")
    assert step.run.num_frames is not None, "the pipeline call sets LTX's num_frames"
    if step.run.num_frames < 1:
        raise ConfigError(f"num_frames must be at least 1, got {step.run.num_frames}")
    spatial, temporal = vae.spatial_compression_ratio, vae.temporal_compression_ratio
    return (step.run.num_frames - 1) // temporal + 1, step.run.height // spatial, step.run.width // spatial


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` (fp32, packed), the shifted sigmas, the transformer on the doubled batch per traced step,
    the prediction upcast and guided, the scheduler's step; then unpacked and de-normalized for the decode."""
    pipeline = pipeline_class(LTX_PIPELINES[0])
    transformer: Any = program.modules["transformer"]
    vae: Any = program.modules["vae"]
    prompt_embeds = embeds["encoder_hidden_states"]
    device = prompt_embeds.device
    frames, height, width = _latent_shape(step, program)
    patch, patch_t = transformer.config.patch_size, transformer.config.patch_size_t
    shape = (step.run.num_images, transformer.config.in_channels, frames, height, width)
    latents = torch.randn(shape, device=device, dtype=torch.float32)
    latents = pipeline._pack_latents(latents, patch, patch_t)
    scheduler = step.scheduler
    timesteps = shifted_timesteps(step, frames * height * width)
    rope_interpolation_scale = (
        vae.temporal_compression_ratio / int(_default("frame_rate")),
        vae.spatial_compression_ratio,
        vae.spatial_compression_ratio,
    )
    guided = step.run.guidance_scale > 1
    step.use("transformer")
    for t in timesteps[: step.steps_traced]:
        latent_model_input = torch.cat([latents] * 2) if guided else latents
        latent_model_input = latent_model_input.to(prompt_embeds.dtype)
        timestep = t.expand(latent_model_input.shape[0]).to(device)
        with transformer.cache_context("cond_uncond"):
            noise_pred = transformer(
                hidden_states=latent_model_input,
                encoder_hidden_states=prompt_embeds,
                timestep=timestep,
                encoder_attention_mask=embeds["encoder_attention_mask"],
                num_frames=frames,
                height=height,
                width=width,
                rope_interpolation_scale=rope_interpolation_scale,
                attention_kwargs=None,
                return_dict=False,
            )[0]
        noise_pred = noise_pred.float()
        if guided:
            noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
            noise_pred = noise_pred_uncond + step.run.guidance_scale * (noise_pred_text - noise_pred_uncond)
        latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
    latents = pipeline._unpack_latents(latents, frames, height, width, patch, patch_t)
    latents = pipeline._denormalize_latents(latents, vae.latents_mean, vae.latents_std, vae.config.scaling_factor)
    return latents.to(prompt_embeds.dtype)


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """The decode noise and timestep where the VAE takes them, ``vae.decode(latents, timestep)``, then
    ``postprocess_video``'s device part per video (denormalize; each goes to the host before the next)."""
    vae: Any = program.modules["vae"]
    device = latents.device
    timestep = None
    if vae.config.timestep_conditioning:
        n = step.run.num_images
        if vae.use_slicing and n > 1:
            raise UnsupportedError(
                f"LTXPipeline: vae_slicing with {n} videos fails in diffusers {diffusers_version()} itself "
                "(AutoencoderKLLTXVideo.decode pairs the latent slices with each other, not with the "
                "timesteps); decode one video, or without slicing"
            )
        noise = torch.randn(latents.shape, device=device, dtype=latents.dtype)
        decode_timestep = [float(_default("decode_timestep"))] * n
        noise_scale = _default("decode_noise_scale")
        decode_noise_scale = decode_timestep if noise_scale is None else [float(noise_scale)] * n
        timestep = torch.tensor(decode_timestep, device=device, dtype=latents.dtype)
        scale = torch.tensor(decode_noise_scale, device=device, dtype=latents.dtype)[:, None, None, None, None]
        latents = (1 - scale) * latents + scale * noise
    latents = latents.to(vae.dtype)
    step.use("vae")
    video = vae.decode(latents, timestep, return_dict=False)[0]
    return postprocess_video(video, vae.spatial_compression_ratio)
