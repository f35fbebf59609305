"""StableDiffusion3Pipeline.__call__'s tensors: three text encoders joined into one prompt, the MMDiT, the VAE's shift.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
SD3 and SD3.5 do differently (diffusers ``pipelines/stable_diffusion_3/pipeline_stable_diffusion_3.py``):
``encode_prompt`` runs CLIP-L and CLIP-G (both with projections) over 77 tokens, joins their
penultimate hidden states, pads them to T5's width and appends T5's ``max_sequence_length`` tokens;
the pooled prompt is the two CLIP projections side by side. Guidance runs the encoders again on the
empty negative prompt and doubles the transformer's batch. The latents are shifted before the decode.
Each function keeps the locals the pipeline's own keeps (they are alive as long as its are).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from vramsim.errors import ConfigError
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.spec import call_default, pipeline_class

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = ["SD3_PIPELINES", "decode", "denoise", "encode_prompt", "max_sequence_length", "sd3_notes"]

SD3_PIPELINES = ("StableDiffusion3Pipeline",)
"""The pipeline classes this module runs."""

_T5_MAX_TOKENS = 512
"""StableDiffusion3Pipeline.check_inputs refuses a ``max_sequence_length`` above 512."""


def max_sequence_length(given: int | None) -> int:
    """The T5 prompt's padded length: as given, else the pipeline's ``__call__`` default (256)."""
    if given is None:
        return int(call_default(SD3_PIPELINES[0], "max_sequence_length"))
    if given > _T5_MAX_TOKENS:
        raise ConfigError(
            f"max_sequence_length cannot be greater than {_T5_MAX_TOKENS} (StableDiffusion3Pipeline's limit), got {given}"
        )
    return given


def sd3_notes(step: Generation) -> list[Assumption]:
    """What the SD3 run assumes beyond the common pipeline notes."""
    clip = step.spec.max_tokens("tokenizer")
    tokens = step.run.max_sequence_length
    negative = (
        "; guidance runs the three encoders on the empty negative prompt too and doubles the transformer's batch"
        if step.run.guidance_scale > 1
        else ""
    )
    return [
        Assumption(
            name="sd3_prompt",
            detail=f"CLIP-L and CLIP-G penultimate states ({clip} tokens) padded to T5's "
            f"width, then T5's {tokens} tokens (max_sequence_length); pooled: both CLIP projections"
            f"{negative}; no skip-layer guidance (skip_guidance_layers=None, the default)",
        )
    ]


def _clip_embeds(step: Generation, program: Program, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``_get_clip_prompt_embeds``: the penultimate hidden state and the projection, repeated per image."""
    ids = program.batch["input_ids"]
    n = step.run.num_images
    encoder: Any = program.modules[name]
    step.use(name)
    prompt_embeds = encoder(ids, output_hidden_states=True)
    pooled_prompt_embeds = prompt_embeds[0]
    prompt_embeds = prompt_embeds.hidden_states[-2]
    prompt_embeds = prompt_embeds.to(dtype=program.modules["text_encoder"].dtype)
    seq_len = prompt_embeds.shape[1]
    prompt_embeds = prompt_embeds.repeat(1, n, 1)
    prompt_embeds = prompt_embeds.view(n, seq_len, -1)
    pooled_prompt_embeds = pooled_prompt_embeds.repeat(1, n)
    pooled_prompt_embeds = pooled_prompt_embeds.view(n, -1)
    return prompt_embeds, pooled_prompt_embeds


def _t5_embeds(step: Generation, program: Program) -> torch.Tensor:
    """``_get_t5_prompt_embeds``: T5's last hidden state over ``max_sequence_length`` tokens, repeated per image."""
    n = step.run.num_images
    step.use("text_encoder_3")
    prompt_embeds = program.modules["text_encoder_3"](program.batch["t5_input_ids"])[0]
    prompt_embeds = prompt_embeds.to(dtype=program.modules["text_encoder"].dtype)
    seq_len = prompt_embeds.shape[1]
    prompt_embeds = prompt_embeds.repeat(1, n, 1)
    return prompt_embeds.view(n, seq_len, -1)


def _joint(step: Generation, program: Program) -> tuple[torch.Tensor, torch.Tensor]:
    """One prompt's (or the negative prompt's) joined embeddings, as ``encode_prompt`` builds them."""
    prompt_embed, pooled_prompt_embed = _clip_embeds(step, program, "text_encoder")
    prompt_2_embed, pooled_prompt_2_embed = _clip_embeds(step, program, "text_encoder_2")
    clip_prompt_embeds = torch.cat([prompt_embed, prompt_2_embed], dim=-1)
    t5_prompt_embed = _t5_embeds(step, program)
    width = t5_prompt_embed.shape[-1] - clip_prompt_embeds.shape[-1]
    clip_prompt_embeds = torch.nn.functional.pad(clip_prompt_embeds, (0, width))
    prompt_embeds = torch.cat([clip_prompt_embeds, t5_prompt_embed], dim=-2)
    pooled_prompt_embeds = torch.cat([pooled_prompt_embed, pooled_prompt_2_embed], dim=-1)
    return prompt_embeds, pooled_prompt_embeds


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt`` and ``__call__``'s concatenation: the negative embeddings first when guidance doubles the
    batch. ``__call__`` keeps the negative ones as locals through the decode, so they are returned too."""
    prompt_embeds, pooled_prompt_embeds = _joint(step, program)
    if step.run.guidance_scale <= 1:
        return {"encoder_hidden_states": prompt_embeds, "pooled_projections": pooled_prompt_embeds}
    negative_prompt_embeds, negative_pooled_prompt_embeds = _joint(step, program)
    return {
        "encoder_hidden_states": torch.cat([negative_prompt_embeds, prompt_embeds], dim=0),
        "pooled_projections": torch.cat([negative_pooled_prompt_embeds, pooled_prompt_embeds], dim=0),
        "negative_prompt_embeds": negative_prompt_embeds,
        "negative_pooled_prompt_embeds": negative_pooled_prompt_embeds,
    }


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents``, the scheduler's timesteps, the transformer on the doubled batch per traced step; then the
    latents shifted for the decode (``latents / scaling_factor + shift_factor``)."""
    pipeline_class(SD3_PIPELINES[0])  # importing its module quietly
    from diffusers.pipelines.stable_diffusion_3.pipeline_stable_diffusion_3 import retrieve_timesteps

    transformer: Any = program.modules["transformer"]
    vae_config: Any = program.modules["vae"].config
    prompt_embeds = embeds["encoder_hidden_states"]
    device, dtype = prompt_embeds.device, prompt_embeds.dtype
    scale = 2 ** (len(vae_config.block_out_channels) - 1)
    shape = (step.run.num_images, transformer.config.in_channels, step.run.height // scale, step.run.width // scale)
    latents = torch.randn(shape, device=device, dtype=dtype)
    scheduler = step.scheduler
    if scheduler.config.get("use_dynamic_shifting", None):
        raise ConfigError("a dynamically shifted scheduler (use_dynamic_shifting) is not run for StableDiffusion3Pipeline")
    timesteps, _ = retrieve_timesteps(scheduler, step.run.num_inference_steps, "cpu")  # kept on the host
    scheduler.set_begin_index(0)
    guided = step.run.guidance_scale > 1
    step.use("transformer")
    for t in timesteps[: step.steps_traced]:
        latent_model_input = torch.cat([latents] * 2) if guided else latents
        timestep = t.expand(latent_model_input.shape[0]).to(device)
        noise_pred = transformer(
            hidden_states=latent_model_input,
            timestep=timestep,
            encoder_hidden_states=prompt_embeds,
            pooled_projections=embeds["pooled_projections"],
            joint_attention_kwargs=None,
            return_dict=False,
        )[0]
        if guided:
            noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
            noise_pred = noise_pred_uncond + step.run.guidance_scale * (noise_pred_text - noise_pred_uncond)
        latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
    return (latents / vae_config.scaling_factor) + vae_config.shift_factor


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """``vae.decode`` of the shifted latents (no upcast in StableDiffusion3Pipeline), then ``postprocess``'s device part."""
    from diffusers.image_processor import VaeImageProcessor

    vae: Any = program.modules["vae"]
    step.use("vae")
    image = vae.decode(latents, return_dict=False)[0]
    return VaeImageProcessor(vae_scale_factor=2 ** (len(vae.config.block_out_channels) - 1)).postprocess(image, output_type="pt")
