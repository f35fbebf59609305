"""CogVideoXPipeline.__call__'s tensors: an unmasked T5 prompt, frame-major latents, the doubled batch, a 3D decode.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
CogVideoX text-to-video does differently (diffusers ``pipelines/cogvideo/pipeline_cogvideox.py``):
T5 runs on the prompt padded to ``max_sequence_length`` (226) without a mask; guidance encodes the
empty negative prompt and doubles the transformer's batch; the latents are ``(frames, channels)``
ordered, ``(num_frames - 1) / 4 + 1`` frames of ``height / 8 x width / 8`` in the pipeline's dtype,
with the transformer's 3D rotary embeddings made once; the prediction is upcast to fp32 each step
and the scheduler's result cast back; the video is made of one prompt's frames (``num_videos_per_prompt``
is forced to 1) and decoded by the causal 3D VAE after a permute and ``1 / scaling_factor``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

from vramsim.errors import ConfigError
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.spec import pipeline_class
from vramsim.workload.diffusion.video import postprocess_video

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = ["COGVIDEOX_PIPELINES", "cogvideox_notes", "decode", "default_size", "denoise", "encode_prompt", "num_frames"]

COGVIDEOX_PIPELINES = ("CogVideoXPipeline",)
"""The pipeline classes this module runs."""


def _spatial(vae: torch.nn.Module) -> int:
    """The pipeline's ``vae_scale_factor_spatial``: 2 per VAE block after the first."""
    vae_config: Any = vae.config
    return int(2 ** (len(vae_config.block_out_channels) - 1))


def default_size(transformer: torch.nn.Module, vae: torch.nn.Module) -> tuple[int, int]:
    """``sample_height`` and ``sample_width`` of the transformer times the VAE's spatial factor (480x720 for 5b)."""
    config: Any = transformer.config
    return config.sample_height * _spatial(vae), config.sample_width * _spatial(vae)


def num_frames(given: int | None, transformer: torch.nn.Module) -> int:
    """Frames as given, else the transformer's ``sample_frames`` (49), as ``__call__`` defaults them."""
    config: Any = transformer.config
    frames = int(config.sample_frames) if given is None else given
    if frames < 1:
        raise ConfigError(f"num_frames must be at least 1, got {frames}")
    return frames


def cogvideox_notes(step: Generation) -> list[Assumption]:
    """What the CogVideoX run assumes beyond the common pipeline notes."""
    guidance = (
        "guidance encodes the empty negative prompt and doubles the transformer's batch"
        if step.guided
        else "no guidance: the transformer's batch is the prompt's"
    )
    return [
        Assumption(
            name="cogvideox_video",
            detail=f"{step.run.num_frames} frames at {step.run.height}x{step.run.width}; T5 over "
            f"max_sequence_length={step.run.max_sequence_length} tokens (no mask); {guidance}; one video per "
            "prompt (the pipeline forces num_videos_per_prompt=1)",
        )
    ]


def _t5_embeds(step: Generation, program: Program) -> torch.Tensor:
    """``_get_t5_prompt_embeds``: T5's last hidden state on the padded prompt (no mask), in T5's dtype."""
    encoder: Any = program.modules["text_encoder"]
    step.use("text_encoder")
    prompt_embeds = encoder(program.batch["input_ids"])[0]
    return prompt_embeds.to(dtype=encoder.dtype)


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt`` and ``__call__``'s concatenation (negative first); the negative embeddings stay a local."""
    if step.run.num_images != 1:
        raise ConfigError(f"CogVideoXPipeline makes one video per prompt (it forces it), got num_images={step.run.num_images}")
    prompt_embeds = _t5_embeds(step, program)
    if not step.guided:
        return {"encoder_hidden_states": prompt_embeds}
    negative_prompt_embeds = _t5_embeds(step, program)
    return {
        "encoder_hidden_states": torch.cat([negative_prompt_embeds, prompt_embeds], dim=0),
        "negative_prompt_embeds": negative_prompt_embeds,
    }


def _latent_frames(step: Generation, program: Program) -> tuple[int, int]:
    """The latent frames and the frames padded to whole temporal patches (CogVideoX 1.5's ``patch_size_t``)."""
    vae: Any = program.modules["vae"]
    transformer: Any = program.modules["transformer"]
    assert step.run.num_frames is not None, "the pipeline call sets CogVideoX's num_frames"
    temporal = int(vae.config.temporal_compression_ratio)
    latent_frames = (step.run.num_frames - 1) // temporal + 1
    patch_t = transformer.config.patch_size_t
    additional = 0 if patch_t is None or latent_frames % patch_t == 0 else patch_t - latent_frames % patch_t
    return latent_frames + additional, additional


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` (the prompt's dtype), the rotary embeddings, the transformer on the doubled batch per traced
    step, the prediction upcast and guided, the scheduler's step cast back; then the padding frames dropped."""
    pipeline = pipeline_class(COGVIDEOX_PIPELINES[0])
    from diffusers.pipelines.cogvideo.pipeline_cogvideox import retrieve_timesteps

    transformer: Any = program.modules["transformer"]
    vae = program.modules["vae"]
    prompt_embeds = embeds["encoder_hidden_states"]
    device, dtype = prompt_embeds.device, prompt_embeds.dtype
    spatial = _spatial(vae)
    if step.run.height % 8 or step.run.width % 8:
        raise ConfigError(f"CogVideoXPipeline needs height and width divisible by 8, got {step.run.height}x{step.run.width}")
    frames, additional = _latent_frames(step, program)
    scheduler = step.scheduler
    timesteps, _ = retrieve_timesteps(scheduler, step.run.num_inference_steps, "cpu")  # kept on the host
    shape = (1, frames, transformer.config.in_channels, step.run.height // spatial, step.run.width // spatial)
    latents = torch.randn(shape, device=device, dtype=dtype) * scheduler.init_noise_sigma
    rotary = None
    if transformer.config.use_rotary_positional_embeddings:
        own = SimpleNamespace(transformer=transformer, vae_scale_factor_spatial=spatial)  # what the method reads
        rotary = pipeline._prepare_rotary_positional_embeddings(own, step.run.height, step.run.width, frames, device)
    guided = step.guided
    step.use("transformer")
    for t in timesteps[: step.steps_traced]:
        latent_model_input = torch.cat([latents] * 2) if guided else latents
        latent_model_input = scheduler.scale_model_input(latent_model_input, t)
        timestep = t.expand(latent_model_input.shape[0]).to(device)
        with transformer.cache_context("cond_uncond"):
            noise_pred = transformer(
                hidden_states=latent_model_input,
                encoder_hidden_states=prompt_embeds,
                timestep=timestep,
                image_rotary_emb=rotary,
                attention_kwargs=None,
                return_dict=False,
            )[0]
        noise_pred = noise_pred.float()
        if guided:
            noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
            noise_pred = noise_pred_uncond + step.run.guidance_scale * (noise_pred_text - noise_pred_uncond)
        latents = scheduler.step(noise_pred, t, latents, eta=0.0, return_dict=False)[0]
        latents = latents.to(dtype)
    if rotary is not None:  # a __call__ local: alive through the decode
        embeds["rotary_cos"], embeds["rotary_sin"] = rotary
    return latents[:, additional:]


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """``decode_latents`` (permuted to channels first, ``1 / scaling_factor``), ``vae.decode``, then
    ``postprocess_video``'s device part per video (denormalize; each goes to the host before the next)."""
    vae: Any = program.modules["vae"]
    step.use("vae")
    latents = latents.permute(0, 2, 1, 3, 4)
    latents = 1 / vae.config.scaling_factor * latents
    video = vae.decode(latents).sample
    return postprocess_video(video, _spatial(vae))
