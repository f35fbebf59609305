"""What differs between the pipelines' training scripts: how each encodes the prompt and computes the loss.

SD and SDXL: DDPM noise and the UNet's epsilon (or velocity) prediction; FLUX: flow matching on packed latents;
SD3: flow matching with the preconditioned prediction. A pipeline is trained once scripts.py names its script and
``_STEPS`` its step.
"""

from __future__ import annotations

from typing import Any

import torch

from vramsim.estimators.assumptions import FLUX_TRAINING_GUIDANCE, SD3_SCRIPT_LORA_TARGETS, SD3_SCRIPT_MAX_SEQUENCE_LENGTH
from vramsim.workload.diffusion import flux
from vramsim.workload.diffusion.components import vae_scale
from vramsim.workload.diffusion.scripts import TRAINING_SCRIPTS
from vramsim.workload.diffusion.spec import pipeline_class
from vramsim.workload.diffusion.training_step import Recipe, TrainingStep
from vramsim.workload.program import Program

__all__ = ["RECIPES"]


def _encode_clip(program: Program) -> dict[str, torch.Tensor]:
    """SD: CLIP's last hidden state (``text_encoder(input_ids, return_dict=False)[0]``)."""
    return {"encoder_hidden_states": program.modules["text_encoder"](program.batch["input_ids"], return_dict=False)[0]}


def _encode_sdxl(program: Program) -> dict[str, torch.Tensor]:
    """The SDXL scripts' ``encode_prompt``: both encoders' penultimate hidden states concatenated, the second's pooled output."""
    ids = program.batch["input_ids"]
    hidden: list[torch.Tensor] = []
    pooled: torch.Tensor | None = None
    for name in ("text_encoder", "text_encoder_2"):
        out = program.modules[name](ids, output_hidden_states=True, return_dict=False)
        pooled = out[0]
        hidden.append(out[-1][-2])
        del out
    assert pooled is not None
    return {"encoder_hidden_states": torch.concat(hidden, dim=-1), "text_embeds": pooled.view(ids.shape[0], -1)}


def _encode_flux(program: Program) -> dict[str, torch.Tensor]:
    """The FLUX script's ``encode_prompt``: CLIP's pooled output, T5's last hidden state, zero text ids."""
    clip: Any = program.modules["text_encoder"]
    t5: Any = program.modules["text_encoder_2"]
    pooled = clip(program.batch["input_ids"], output_hidden_states=False).pooler_output.to(dtype=clip.dtype)
    embeds = t5(program.batch["t5_input_ids"])[0].to(dtype=t5.dtype)
    text_ids = torch.zeros(embeds.shape[1], 3, device=embeds.device, dtype=clip.dtype)
    return {"encoder_hidden_states": embeds, "pooled_projections": pooled, "txt_ids": text_ids}


def _encode_sd3(program: Program) -> dict[str, torch.Tensor]:
    """The SD3 scripts' ``encode_prompt``: both CLIPs' penultimate states side by side, padded to T5's width and followed
    by T5's last hidden state; the pooled prompt is both CLIP projections."""
    clip_prompt_embeds_list, clip_pooled_prompt_embeds_list = [], []
    for name in ("text_encoder", "text_encoder_2"):
        encoder: Any = program.modules[name]
        prompt_embeds = encoder(program.batch["input_ids"], output_hidden_states=True)
        pooled_prompt_embeds = prompt_embeds[0]
        prompt_embeds = prompt_embeds.hidden_states[-2].to(dtype=encoder.dtype)
        clip_prompt_embeds_list.append(prompt_embeds)
        clip_pooled_prompt_embeds_list.append(pooled_prompt_embeds)
    clip_prompt_embeds = torch.cat(clip_prompt_embeds_list, dim=-1)
    pooled_prompt_embeds = torch.cat(clip_pooled_prompt_embeds_list, dim=-1)
    t5: Any = program.modules["text_encoder_3"]
    t5_prompt_embed = t5(program.batch["t5_input_ids"])[0].to(dtype=t5.dtype)
    width = t5_prompt_embed.shape[-1] - clip_prompt_embeds.shape[-1]
    clip_prompt_embeds = torch.nn.functional.pad(clip_prompt_embeds, (0, width))
    prompt_embeds = torch.cat([clip_prompt_embeds, t5_prompt_embed], dim=-2)
    return {"encoder_hidden_states": prompt_embeds, "pooled_projections": pooled_prompt_embeds}


def _unet_loss(step: TrainingStep, program: Program, latents: torch.Tensor, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """DDPM's ``add_noise`` at uniform timesteps, the UNet's prediction, ``mse_loss(pred.float(), target.float())``
    against the noise (epsilon) or the velocity (``v_prediction``)."""
    unet: Any = program.modules["unet"]
    scheduler = step.scheduler
    noise = torch.randn_like(latents)
    n = latents.shape[0]
    timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (n,), device=latents.device).long()
    noisy = scheduler.add_noise(latents, noise, timesteps)
    added = None
    if "text_embeds" in embeds:  # SDXL: (original size, crop top-left, target size) per image
        height, width = (side * vae_scale(step.spec) for side in latents.shape[-2:])
        time_ids = torch.tensor([[height, width, 0, 0, height, width]]).to(latents.device, dtype=step.weight_dtype)
        added = {"time_ids": time_ids.repeat(n, 1), "text_embeds": embeds["text_embeds"]}
    with program.autocast():
        pred = unet(noisy, timesteps, embeds["encoder_hidden_states"], added_cond_kwargs=added, return_dict=False)[0]
    del noisy
    velocity = scheduler.config.prediction_type == "v_prediction"
    target = scheduler.get_velocity(latents, noise, timesteps) if velocity else noise
    return torch.nn.functional.mse_loss(pred.float(), target.float(), reduction="mean")


def _flux_loss(step: TrainingStep, program: Program, latents: torch.Tensor, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """Flow matching: ``(1 - sigma) x + sigma noise`` packed into 2x2 patches, the transformer at ``t / 1000``,
    the prediction unpacked, ``mean(weighting * (pred - (noise - x))**2)`` with the scripts' default weighting
    (``none``: ones)."""
    from diffusers.training_utils import compute_loss_weighting_for_sd3

    pipeline = pipeline_class(flux.FLUX_PIPELINES[0])
    transformer: Any = program.modules["transformer"]
    n, channels, height, width = latents.shape
    device, dtype = latents.device, latents.dtype
    image_ids = pipeline._prepare_latent_image_ids(n, height // 2, width // 2, device, dtype)
    noise, timesteps, sigmas, noisy = _flow_noise(step, latents, weighting_scheme="none")
    packed = pipeline._pack_latents(noisy, n, channels, height, width)
    del noisy
    guidance = None
    if transformer.config.guidance_embeds:
        guidance = torch.tensor([FLUX_TRAINING_GUIDANCE], device=device).expand(n)
    with program.autocast():
        pred = transformer(
            hidden_states=packed,
            timestep=timesteps / 1000,
            guidance=guidance,
            pooled_projections=embeds["pooled_projections"],
            encoder_hidden_states=embeds["encoder_hidden_states"],
            txt_ids=embeds["txt_ids"],
            img_ids=image_ids,
            return_dict=False,
        )[0]
    del packed
    scale = vae_scale(step.spec)
    pred = pipeline._unpack_latents(pred, height=height * scale, width=width * scale, vae_scale_factor=scale)
    weighting = compute_loss_weighting_for_sd3(weighting_scheme="none", sigmas=sigmas)
    target = noise - latents
    loss = torch.mean((weighting.float() * (pred.float() - target.float()) ** 2).reshape(n, -1), 1)
    return loss.mean()


def _flow_noise(step: TrainingStep, latents: torch.Tensor, *, weighting_scheme: str) -> tuple[torch.Tensor, ...]:
    """The flow-matching scripts' noising: timesteps drawn on the host by the weighting scheme's density (which scheme
    does not change the memory), ``get_sigmas`` on the device, ``(1 - sigma) x + sigma noise``. Returns the noise,
    the timesteps, the sigmas and the noisy latents."""
    from diffusers.training_utils import compute_density_for_timestep_sampling

    scheduler = step.scheduler
    n, device, dtype = latents.shape[0], latents.device, latents.dtype
    noise = torch.randn_like(latents)
    u = compute_density_for_timestep_sampling(
        weighting_scheme=weighting_scheme, batch_size=n, logit_mean=0.0, logit_std=1.0, mode_scale=1.29
    )  # on the host
    indices = (u * scheduler.config.num_train_timesteps).long()
    timesteps = scheduler.timesteps[indices].to(device=device)
    # get_sigmas: the schedule to the device, each timestep's index found there (read back with .item(): the
    # indices are the host's here, the device's tensors the same)
    sigmas_all = scheduler.sigmas.to(device=device, dtype=dtype)
    schedule = scheduler.timesteps.to(device)
    sigmas = sigmas_all[indices.to(device)].flatten()
    del sigmas_all, schedule
    sigmas = sigmas.view(n, *([1] * (latents.ndim - 1)))
    noisy = (1.0 - sigmas) * latents + sigmas * noise
    return noise, timesteps, sigmas, noisy


def _sd3_loss(step: TrainingStep, program: Program, latents: torch.Tensor, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """The SD3 scripts' flow matching with their defaults: timesteps by ``logit_normal`` density, the MMDiT on the noisy
    latents, the prediction preconditioned (``--precondition_outputs 1``: ``pred * -sigma + noisy``) against the latents,
    ``mean(weighting * (pred - x)**2)`` (``logit_normal``'s weighting: ones)."""
    from diffusers.training_utils import compute_loss_weighting_for_sd3

    transformer: Any = program.modules["transformer"]
    _noise, timesteps, sigmas, noisy = _flow_noise(step, latents, weighting_scheme="logit_normal")  # noise: alive to the loss
    with program.autocast():
        pred = transformer(
            hidden_states=noisy,
            timestep=timesteps,
            encoder_hidden_states=embeds["encoder_hidden_states"],
            pooled_projections=embeds["pooled_projections"],
            return_dict=False,
        )[0]
    pred = pred * (-sigmas) + noisy
    weighting = compute_loss_weighting_for_sd3(weighting_scheme="logit_normal", sigmas=sigmas)
    target = latents
    loss = torch.mean((weighting.float() * (pred.float() - target.float()) ** 2).reshape(target.shape[0], -1), 1)
    return loss.mean()


_STEPS: dict[str, dict[str, Any]] = {
    "StableDiffusionPipeline": dict(forward=_unet_loss, encode=_encode_clip, noise_scheduler="DDPMScheduler"),
    "StableDiffusionXLPipeline": dict(forward=_unet_loss, encode=_encode_sdxl, vae_fp32=True,
                                      noise_scheduler="DDPMScheduler"),
    "FluxPipeline": dict(forward=_flux_loss, encode=_encode_flux),
    "StableDiffusion3Pipeline": dict(forward=_sd3_loss, encode=_encode_sd3, vae_fp32=True,
                                     lora_targets=SD3_SCRIPT_LORA_TARGETS,
                                     max_sequence_length=SD3_SCRIPT_MAX_SEQUENCE_LENGTH),
}  # fmt: skip
"""What each training script does differently, by pipeline class."""

RECIPES: dict[str, Recipe] = {name: Recipe(script, **_STEPS[name]) for name, script in TRAINING_SCRIPTS.items()}
"""The pipelines whose denoiser is trained, by class: each script's step."""
