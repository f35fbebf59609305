"""FluxPipeline.__call__'s tensors: CLIP's pooled and T5's prompt embeddings, packed latents, the VAE's shift.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
FLUX does differently from SD/SDXL (diffusers ``pipelines/flux/pipeline_flux.py``): the prompt
goes through CLIP for its pooled output only and through T5 padded to ``max_sequence_length``;
the 16-channel latents are packed into 2x2 patches (a sequence of tokens with their ``img_ids``);
the transformer runs once per step (no batch doubling: FLUX.1-dev is guidance-distilled and takes
the guidance scale as an embedding); the flow-matching scheduler's sigmas are shifted by the
image's token count; the latents are unpacked and shifted before the decode. diffusers' own static
helpers pack, unpack and place the ids, so their tensors are the pipeline's. FluxKontextPipeline runs the same call
with a reference image's tokens after the noise tokens (``flux_kontext.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import FLUX_SCHNELL_MAX_SEQUENCE_LENGTH
from vramsim.results.report import Assumption
from vramsim.workload.diffusion import flux_kontext
from vramsim.workload.diffusion.spec import call_default, pipeline_class

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.diffusion.spec import PipelineSpec
    from vramsim.workload.program import Program

__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "FLUX_PIPELINES",
    "decode",
    "denoise",
    "encode_prompt",
    "flux_notes",
    "max_sequence_length",
    "shifted_timesteps",
]

FLUX_PIPELINES = ("FluxPipeline", *flux_kontext.KONTEXT_PIPELINES)
"""The pipeline classes this module runs."""

DEFAULT_SAMPLE_SIZE = 128
"""FluxPipeline's (and FluxKontextPipeline's) ``default_sample_size``: latents of 128 (1024 px with the 8x VAE) unless
height/width are given."""

_T5_MAX_TOKENS = 512
"""FluxPipeline.check_inputs refuses a ``max_sequence_length`` above 512."""


def max_sequence_length(transformer: torch.nn.Module, given: int | None) -> int:
    """The T5 prompt's padded length: as given, else the pipeline's default (512) for a guidance-distilled
    transformer (dev); the timestep-distilled schnell (no guidance embedding) takes
    FLUX_SCHNELL_MAX_SEQUENCE_LENGTH."""
    if given is not None:
        if given > _T5_MAX_TOKENS:
            raise ConfigError(f"max_sequence_length cannot be greater than {_T5_MAX_TOKENS} (FluxPipeline's limit), got {given}")
        return given
    config: Any = transformer.config
    return call_default(FLUX_PIPELINES[0], "max_sequence_length") if config.guidance_embeds else FLUX_SCHNELL_MAX_SEQUENCE_LENGTH


def flux_notes(spec: PipelineSpec, step: Generation, transformer: torch.nn.Module) -> list[Assumption]:
    """What the FLUX run assumes beyond the common pipeline notes."""
    config: Any = transformer.config
    tokens = step.run.max_sequence_length
    if config.guidance_embeds:
        guidance = (
            f"guidance {step.run.guidance_scale} given to the transformer as an embedding, one transformer "
            "call per step (guidance-distilled: no batch doubling, no negative prompt)"
        )
    else:
        guidance = "no guidance embedding (timestep-distilled: guidance_scale is not used), one transformer call per step"
    notes = [
        Assumption(
            name="flux_prompt",
            detail=f"CLIP's pooled output (prompt padded to {spec.max_tokens('tokenizer')} "
            f"tokens) and T5's last hidden state (padded to max_sequence_length={tokens}); {guidance}",
        ),
    ]
    if step.run.reference_size is not None:
        notes += flux_kontext.kontext_notes(step)
    if "max_sequence_length" not in step.run.defaulted:
        return notes
    return [
        *notes,
        Assumption(
            name="flux_max_sequence_length",
            detail="T5 prompt length (--max-sequence-length not "
            "given): the pipeline's default 512 for guidance-distilled transformers, "
            f"{FLUX_SCHNELL_MAX_SEQUENCE_LENGTH} for timestep-distilled ones (FLUX_SCHNELL_MAX_SEQUENCE_LENGTH, as "
            "diffusers' FLUX docs run schnell)",
        ),
    ]


def shifted_timesteps(step: Generation, image_seq_len: int) -> Any:
    """The flow-matching pipelines' timesteps (FLUX's, LTX's, Qwen-Image's): ``linspace(1, 1 / steps)`` sigmas shifted
    by ``calculate_shift`` of the image's (or video's) token count; kept on the host."""
    pipeline_class(FLUX_PIPELINES[0])  # first: importing its module quietly
    from diffusers.pipelines.flux.pipeline_flux import calculate_shift, retrieve_timesteps

    steps = step.run.num_inference_steps
    sigmas = np.linspace(1.0, 1 / steps, steps).tolist()  # the pipelines pass the array; the host keeps either
    scheduler = step.scheduler
    mu = calculate_shift(
        image_seq_len,
        scheduler.config.get("base_image_seq_len", 256),
        scheduler.config.get("max_image_seq_len", 4096),
        scheduler.config.get("base_shift", 0.5),
        scheduler.config.get("max_shift", 1.15),
    )
    timesteps, _ = retrieve_timesteps(scheduler, steps, "cpu", sigmas=sigmas, mu=mu)
    return timesteps


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``encode_prompt``: CLIP's pooled output, T5's last hidden state and the text ids (zeros)."""
    ids, t5_ids = program.batch["input_ids"], program.batch["t5_input_ids"]
    n = step.run.num_images
    clip: Any = program.modules["text_encoder"]
    t5: Any = program.modules["text_encoder_2"]
    step.use("text_encoder")
    out = clip(ids, output_hidden_states=False)
    pooled = out.pooler_output.to(dtype=clip.dtype)
    del out
    pooled = pooled.repeat(1, n).view(n, -1)  # (n, clip hidden)
    step.use("text_encoder_2")
    embeds = t5(t5_ids, output_hidden_states=False)[0].to(dtype=t5.dtype)
    seq = embeds.shape[1]
    embeds = embeds.repeat(1, n, 1).view(n, seq, -1)  # (n, max_sequence_length, 4096)
    text_ids = torch.zeros(seq, 3, device=embeds.device, dtype=clip.dtype)  # made on the device (host copy not counted)
    return {"encoder_hidden_states": embeds, "pooled_projections": pooled, "txt_ids": text_ids}


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` (packed; Kontext's reference image encoded first), the shifted sigmas, the transformer once
    per traced step (on the noise and reference tokens, its prediction cut to the noise ones); then the latents
    unpacked and shifted for the decode (``latents / scaling_factor + shift_factor``)."""
    pipeline = pipeline_class(FLUX_PIPELINES[0])

    transformer: Any = program.modules["transformer"]
    hidden = embeds["encoder_hidden_states"]
    n, device, dtype = step.run.num_images, hidden.device, hidden.dtype
    height, width = _latent_size(step, program)
    channels = transformer.config.in_channels // 4
    image_latents: torch.Tensor | None = None  # Kontext: (n, reference tokens, 4 * channels), held through the call
    image_ids: torch.Tensor | None = None  # and their ids
    img_ids: torch.Tensor | None = None
    if step.run.reference_size is not None:  # Kontext's prepare_latents: the image's tokens, the noise's ids, the noise
        image_latents, image_ids = flux_kontext.reference_tokens(step, program, channels, dtype, device)
        img_ids = pipeline._prepare_latent_image_ids(n, height // 2, width // 2, device, dtype)
    latents = torch.randn((n, channels, height, width), device=device, dtype=dtype)
    latents = pipeline._pack_latents(latents, n, channels, height, width)  # (n, h/2 * w/2, 4 * channels)
    if img_ids is None:  # FluxPipeline's: the ids after the noise
        img_ids = pipeline._prepare_latent_image_ids(n, height // 2, width // 2, device, dtype)  # (h/2 * w/2, 3)
    if image_ids is not None:
        img_ids = torch.cat([img_ids, image_ids], dim=0)  # (noise + reference tokens, 3)
    scheduler = step.scheduler
    timesteps = shifted_timesteps(step, latents.shape[1])
    guidance = None
    if transformer.config.guidance_embeds:
        guidance = torch.full([1], step.run.guidance_scale, device=device, dtype=torch.float32).expand(n)
    scheduler.set_begin_index(0)
    step.use("transformer")
    for t in timesteps[: step.steps_traced]:
        timestep = t.expand(n).to(device=device, dtype=dtype)
        model_input = latents if image_latents is None else torch.cat([latents, image_latents], dim=1)
        noise = transformer(
            hidden_states=model_input,
            timestep=timestep / 1000,
            guidance=guidance,
            pooled_projections=embeds["pooled_projections"],
            encoder_hidden_states=hidden,
            txt_ids=embeds["txt_ids"],
            img_ids=img_ids,
            joint_attention_kwargs={},
            return_dict=False,
        )[0][:, : latents.size(1)]
        del timestep
        latents = scheduler.step(noise, t, latents, return_dict=False)[0]
        del noise, model_input
    # __call__ rebinds its ``latents`` to the unpacked, shifted ones and holds them through the decode
    vae_config: Any = program.modules["vae"].config
    latents = pipeline._unpack_latents(latents, step.run.height, step.run.width, _vae_scale_factor(program))
    return (latents / vae_config.scaling_factor) + vae_config.shift_factor  # (n, 16, h, w)


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """``vae.decode`` of the unpacked latents (no upcast in FluxPipeline), then ``postprocess``'s device part."""
    from diffusers.image_processor import VaeImageProcessor

    vae: Any = program.modules["vae"]
    step.use("vae")
    image = vae.decode(latents, return_dict=False)[0]
    return VaeImageProcessor(vae_scale_factor=_vae_scale_factor(program) * 2).postprocess(image, output_type="pt")


def _vae_scale_factor(program: Program) -> int:
    vae_config: Any = program.modules["vae"].config
    return int(2 ** (len(vae_config.block_out_channels) - 1))


def _latent_size(step: Generation, program: Program) -> tuple[int, int]:
    """``prepare_latents``: the latent side rounded down to whole 2x2 patches (the pipeline warns and rounds)."""
    scale = _vae_scale_factor(program)
    return 2 * (step.run.height // (scale * 2)), 2 * (step.run.width // (scale * 2))
