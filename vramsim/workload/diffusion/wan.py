"""WanPipeline.__call__'s tensors: a masked UMT5 prompt, fp32 video latents, two transformer calls per step, a 3D decode.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
Wan 2.1 text-to-video does differently (diffusers ``pipelines/wan/pipeline_wan.py``): the prompt
goes through UMT5 alone, padded to ``max_sequence_length`` (512) with its mask, and is re-padded
with zeros after its real tokens; the latents are fp32, ``(num_frames - 1) / 4 + 1`` frames of
``height / 8 x width / 8``, and ``__call__`` keeps an fp32 mask of the same shape; guidance runs the
transformer twice per step, on the prompt and on the negative prompt (no doubled batch); the latents
are de-normalized with the VAE's per-channel mean and std and decoded by the causal 3D VAE, which
decodes frame by frame through its own feature cache. Wan 2.2 TI2V (``expand_timesteps`` in model_index.json) gives
the transformer a timestep per latent patch, which it embeds token by token, and decodes with its 16x VAE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import WAN_VAE_DTYPE
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.spec import call_default
from vramsim.workload.diffusion.video import postprocess_video

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = ["WAN_PIPELINES", "decode", "default_size", "denoise", "encode_prompt", "num_frames", "wan_notes"]

WAN_PIPELINES = ("WanPipeline",)
"""The pipeline classes this module runs."""


def default_size() -> tuple[int, int]:
    """WanPipeline.__call__'s own height and width defaults (480x832): it does not derive them from a sample size."""
    return int(call_default(WAN_PIPELINES[0], "height")), int(call_default(WAN_PIPELINES[0], "width"))


def num_frames(given: int | None, vae: torch.nn.Module) -> int:
    """Frames as given (else ``__call__``'s default, 81), rounded as the pipeline rounds them: ``num_frames - 1`` a
    multiple of the VAE's temporal factor."""
    frames = int(call_default(WAN_PIPELINES[0], "num_frames")) if given is None else given
    vae_config: Any = vae.config
    temporal = int(vae_config.scale_factor_temporal)
    if frames % temporal != 1:
        frames = frames // temporal * temporal + 1
    return max(frames, 1)


def wan_notes(step: Generation) -> list[Assumption]:
    """What the Wan run assumes beyond the common pipeline notes."""
    guidance = (
        "guidance runs the transformer twice per step (prompt, then the empty negative prompt), each on a batch of one video"
        if step.run.guidance_scale > 1
        else "no guidance: one transformer call per step"
    )
    notes = [
        Assumption(
            name="wan_video",
            detail=f"{step.run.num_frames} frames at {step.run.height}x{step.run.width}; UMT5 over "
            f"max_sequence_length={step.run.max_sequence_length} masked tokens, the prompt taken to fill them; "
            f"{guidance}",
        ),
        Assumption(
            name="wan_vae_dtype",
            detail=f"the VAE is kept in {WAN_VAE_DTYPE} whatever --dtype says "
            "(WAN_VAE_DTYPE: Wan's model card loads it so), so the latents are cast to it for the decode",
        ),
    ]
    boundary = _boundary_timestep(step)
    if boundary is not None:
        notes.append(
            Assumption(
                name="wan_experts",
                detail=f"two experts, both loaded: transformer denoises at timesteps >= {boundary:g} "
                "(boundary_ratio x num_train_timesteps), transformer_2 below, under the same guidance "
                "(guidance_scale_2 unset); the first step below the boundary is traced after the first steps",
            )
        )
    return notes


def _t5_embeds(step: Generation, program: Program) -> torch.Tensor:
    """``_get_t5_prompt_embeds``: UMT5's last hidden state, the prompt's tokens re-padded with zeros, per video."""
    n = step.run.num_images
    encoder: Any = program.modules["text_encoder"]
    step.use("text_encoder")
    ids, mask = program.batch["input_ids"], program.batch["attention_mask"]
    max_sequence_length = ids.shape[1]
    prompt_embeds = encoder(ids, mask).last_hidden_state
    prompt_embeds = prompt_embeds.to(dtype=encoder.dtype)
    prompt_embeds = [u[:max_sequence_length] for u in prompt_embeds]  # the tokenizer's seq_lens: the prompt fills them
    prompt_embeds = torch.stack(
        [torch.cat([u, u.new_zeros(max_sequence_length - u.size(0), u.size(1))]) for u in prompt_embeds], dim=0
    )
    seq_len = prompt_embeds.shape[1]
    prompt_embeds = prompt_embeds.repeat(1, n, 1)
    return prompt_embeds.view(n, seq_len, -1)


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt``: the prompt's embeddings and, under guidance, the empty negative prompt's (kept apart)."""
    dtype = next(program.modules["transformer"].parameters()).dtype
    prompt_embeds = _t5_embeds(step, program).to(dtype)
    if step.run.guidance_scale <= 1:
        return {"encoder_hidden_states": prompt_embeds}
    return {"encoder_hidden_states": prompt_embeds, "negative_prompt_embeds": _t5_embeds(step, program).to(dtype)}


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` (fp32), ``__call__``'s fp32 mask, the transformer on the prompt and on the negative prompt per
    traced step (Wan 2.2 A14B: the high-noise expert from ``boundary_ratio`` x ``num_train_timesteps`` up, the
    low-noise ``transformer_2`` below, each under the same guidance), the guidance combination, the scheduler's step."""
    transformer: Any = program.modules["transformer"]
    vae_config: Any = program.modules["vae"].config
    prompt_embeds = embeds["encoder_hidden_states"]
    device, dtype = prompt_embeds.device, prompt_embeds.dtype
    spatial, temporal = int(vae_config.scale_factor_spatial), int(vae_config.scale_factor_temporal)
    patch = transformer.config.patch_size
    height = step.run.height // (spatial * patch[1]) * (spatial * patch[1])
    width = step.run.width // (spatial * patch[2]) * (spatial * patch[2])
    if not height or not width:
        raise ConfigError(f"WanPipeline needs height and width of at least {spatial * patch[1]} pixels")
    assert step.run.num_frames is not None, "the pipeline call sets Wan's num_frames"
    scheduler = step.scheduler
    scheduler.set_timesteps(step.run.num_inference_steps, device="cpu")  # kept on the host
    shape = (
        step.run.num_images,
        transformer.config.in_channels,
        (step.run.num_frames - 1) // temporal + 1,
        height // spatial,
        width // spatial,
    )
    latents = torch.randn(shape, device=device, dtype=torch.float32)
    mask = torch.ones(latents.shape, dtype=torch.float32, device=device)
    scheduler.set_begin_index(0)
    guided = step.run.guidance_scale > 1
    for t in _traced_timesteps(step, scheduler.timesteps):
        name = _expert(step, t)
        current: Any = program.modules[name]
        step.use(name)
        latent_model_input = latents.to(dtype)
        timestep = _timestep(step, t, mask, latents.shape[0]).to(device)
        noise_pred = current(
            hidden_states=latent_model_input,
            timestep=timestep,
            encoder_hidden_states=prompt_embeds,
            attention_kwargs=None,
            return_dict=False,
        )[0]
        if guided:
            noise_uncond = current(
                hidden_states=latent_model_input,
                timestep=timestep,
                encoder_hidden_states=embeds["negative_prompt_embeds"],
                attention_kwargs=None,
                return_dict=False,
            )[0]
            noise_pred = noise_uncond + step.run.guidance_scale * (noise_pred - noise_uncond)
        latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
    embeds["mask"] = mask  # a __call__ local: alive through the decode
    return latents


def _boundary_timestep(step: Generation) -> float | None:
    """Where Wan 2.2 A14B hands over to its low-noise expert: ``boundary_ratio`` x ``num_train_timesteps``; None
    without a ``boundary_ratio`` (one transformer throughout)."""
    ratio = step.spec.index.get("boundary_ratio")
    return None if ratio is None else float(ratio) * int(step.scheduler.config.num_train_timesteps)


def _expert(step: Generation, t: torch.Tensor) -> str:
    """The transformer that denoises at ``t``: ``transformer`` at and above the boundary, ``transformer_2`` below."""
    boundary = _boundary_timestep(step)
    return "transformer" if boundary is None or t >= boundary else "transformer_2"


def _traced_timesteps(step: Generation, timesteps: torch.Tensor) -> list[torch.Tensor]:
    """The steps traced and, with two experts, the first step below the boundary too (the hand-over, where
    ``transformer_2`` first runs), if the traced steps do not reach it."""
    traced = list(timesteps[: step.steps_traced])
    boundary = _boundary_timestep(step)
    if boundary is None:
        return traced
    below = [t for t in timesteps if t < boundary]
    if below and all(t >= boundary for t in traced):
        traced.append(below[0])
    return traced


def _timestep(step: Generation, t: torch.Tensor, mask: torch.Tensor, batch: int) -> torch.Tensor:
    """The transformer's timestep: one per video, or, where model_index.json sets ``expand_timesteps`` (Wan 2.2
    TI2V), one per latent patch (``mask[0][0][:, ::2, ::2] * t`` flattened, batch x seq_len), which the transformer
    embeds token by token."""
    if not step.spec.index.get("expand_timesteps"):
        return t.expand(batch)
    return (mask[0][0][:, ::2, ::2] * t).flatten().unsqueeze(0).expand(batch, -1)


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """The latents cast to the VAE's dtype and de-normalized, ``vae.decode`` (frame by frame through its cache), then
    ``postprocess_video``'s device part per video (denormalize; each goes to the host before the next)."""
    vae: Any = program.modules["vae"]
    step.use("vae")
    latents = latents.to(dtype=vae.dtype)
    z_dim = vae.config.z_dim
    latents_mean = torch.tensor(vae.config.latents_mean).view(1, z_dim, 1, 1, 1).to(latents.device, latents.dtype)
    latents_std = 1.0 / torch.tensor(vae.config.latents_std).view(1, z_dim, 1, 1, 1).to(latents.device, latents.dtype)
    latents = latents / latents_std + latents_mean
    video = vae.decode(latents, return_dict=False)[0]
    return postprocess_video(video, int(vae.config.scale_factor_spatial))
