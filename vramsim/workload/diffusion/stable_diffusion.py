"""StableDiffusionPipeline's and StableDiffusionXLPipeline's ``__call__``: CLIP prompts, the UNet loop, the VAE decode.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds
what SD 1.5 and SDXL do (diffusers ``pipelines/stable_diffusion/pipeline_stable_diffusion.py`` and
``pipelines/stable_diffusion_xl/pipeline_stable_diffusion_xl.py``): SD's prompt is CLIP's last hidden state, the
empty negative prompt encoded too under guidance; SDXL's is both CLIPs' penultimate states side by side with the
second's pooled projection and the size ids, its negative embeddings zeros (``force_zeros_for_empty_prompt``); the
UNet runs on the doubled batch under guidance; SDXL decodes in fp32 where its fp16 VAE says ``force_upcast``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.diffusion.spec import PipelineSpec
    from vramsim.workload.program import Program

__all__ = ["SD_PIPELINES", "decode", "denoise", "encode_prompt", "upcasts_vae"]

SD_PIPELINES = ("StableDiffusionPipeline", "StableDiffusionXLPipeline")
"""The pipeline classes this module runs."""


def upcasts_vae(vae: torch.nn.Module, spec: PipelineSpec) -> bool:
    """SDXL's pipeline decodes in fp32 when the VAE is fp16 and its config says ``force_upcast``."""
    vae_config: Any = vae.config
    return (
        spec.class_name == "StableDiffusionXLPipeline"
        and next(vae.parameters()).dtype == torch.float16
        and bool(vae_config.force_upcast)
    )


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt``: the embeddings, the negative ones first when guidance doubles the batch."""
    ids = program.batch["input_ids"]
    n = step.run.num_images
    if "text_encoder_2" not in program.modules:  # StableDiffusionPipeline: CLIP's last hidden state
        encoder = program.modules["text_encoder"]
        step.use("text_encoder")
        embeds = encoder(ids)[0].repeat(1, n, 1).view(n, ids.shape[1], -1)
        if step.guided:  # the empty negative prompt goes through the encoder too
            negative = encoder(ids)[0].repeat(1, n, 1).view(n, ids.shape[1], -1)
            embeds = torch.cat([negative, embeds])
        return {"encoder_hidden_states": embeds}
    hidden: list[torch.Tensor] = []
    pooled: torch.Tensor | None = None
    for name in ("text_encoder", "text_encoder_2"):
        step.use(name)
        out = program.modules[name](ids, output_hidden_states=True)
        if pooled is None and out[0].ndim == 2:
            pooled = out[0]
        hidden.append(out.hidden_states[-2])
        del out
    assert pooled is not None, "CLIPTextModelWithProjection returns the pooled projection first"
    embeds = torch.concat(hidden, dim=-1)
    del hidden
    embeds = embeds.repeat(1, n, 1).view(n, embeds.shape[1], -1)
    pooled = pooled.repeat(1, n).view(n, -1)
    time_ids = torch.tensor([[step.run.height, step.run.width, 0, 0, step.run.height, step.run.width]], dtype=embeds.dtype).to(
        embeds.device
    )
    if step.guided:  # force_zeros_for_empty_prompt: the negative embeddings are zeros, no encoder run
        embeds = torch.cat([torch.zeros_like(embeds), embeds])
        pooled = torch.cat([torch.zeros_like(pooled), pooled])
        time_ids = torch.cat([time_ids, time_ids])
    return {"encoder_hidden_states": embeds, "text_embeds": pooled, "time_ids": time_ids.repeat(n, 1)}


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents``, the scheduler's timesteps, the UNet on the doubled batch per traced step, the guidance
    combination, the scheduler's step."""
    unet: Any = program.modules["unet"]
    vae_config: Any = program.modules["vae"].config
    scale = 2 ** (len(vae_config.block_out_channels) - 1)
    hidden = embeds["encoder_hidden_states"]
    scheduler = step.scheduler
    scheduler.set_timesteps(step.run.num_inference_steps, device="cpu")
    if hasattr(scheduler, "set_begin_index"):
        scheduler.set_begin_index(0)
    shape = (step.run.num_images, unet.config.in_channels, step.run.height // scale, step.run.width // scale)
    latents = torch.randn(shape, device=hidden.device, dtype=hidden.dtype) * scheduler.init_noise_sigma
    added = {k: embeds[k] for k in ("text_embeds", "time_ids") if k in embeds} or None
    step.use("unet")
    for t in scheduler.timesteps[: step.steps_traced]:
        model_input = torch.cat([latents] * 2) if step.guided else latents
        model_input = scheduler.scale_model_input(model_input, t)
        noise = unet(model_input, t, encoder_hidden_states=hidden, added_cond_kwargs=added, return_dict=False)[0]
        del model_input
        if step.guided:
            uncond, text = noise.chunk(2)
            noise = uncond + step.run.guidance_scale * (text - uncond)
            del uncond, text
        latents = scheduler.step(noise, t, latents, return_dict=False)[0]
        del noise
    return latents


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """``vae.decode(latents / scaling_factor)``, in fp32 where the pipeline upcasts, then ``postprocess``'s
    device part (denormalize; the copy to the host follows)."""
    from diffusers.image_processor import VaeImageProcessor

    vae: Any = program.modules["vae"]
    step.use("vae")
    upcast = upcasts_vae(vae, step.spec)
    if upcast:  # vae.to(dtype=...) as the pipeline calls it, without ModelMixin.to's warning
        torch.nn.Module.to(vae, dtype=torch.float32)
        latents = latents.to(torch.float32)
    image = vae.decode(latents / vae.config.scaling_factor, return_dict=False)[0]
    del latents
    if upcast:
        torch.nn.Module.to(vae, dtype=torch.float16)
    return VaeImageProcessor().postprocess(image, output_type="pt")
