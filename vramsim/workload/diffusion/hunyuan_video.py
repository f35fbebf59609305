"""HunyuanVideoPipeline.__call__'s tensors: a templated Llama prompt, CLIP's pooled one, fp32 video latents, a 3D decode.

``pipelines.py`` builds every pipeline (components, offload) and ``generation.py`` runs its call; this module holds what
HunyuanVideo text-to-video does differently (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video.py``):
the prompt, inside the pipeline's template, goes through Llama padded to ``crop_start +
max_sequence_length`` (95 + 256) tokens with its mask and every layer's hidden state kept
(``output_hidden_states=True``), the third from last taken and the template's tokens cropped; CLIP
gives its pooled output at 77 tokens; the transformer is guidance-distilled (the scale, times 1000,
is an embedding) and runs once per step on fp32 latents of ``(num_frames - 1) / 4 + 1`` frames of
``height / 8 x width / 8`` cast to its dtype (true CFG needs a negative prompt, which the call
does not give by default); the latents are divided by the VAE's scaling factor and decoded.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vramsim.errors import ConfigError
from vramsim.results.report import Assumption
from vramsim.workload.diffusion.spec import call_default, pipeline_class
from vramsim.workload.diffusion.video import postprocess_video

if TYPE_CHECKING:
    from vramsim.workload.diffusion.generation import Generation
    from vramsim.workload.program import Program

__all__ = [
    "HUNYUAN_VIDEO_PIPELINES",
    "decode",
    "default_size",
    "denoise",
    "encode_prompt",
    "hunyuan_video_notes",
    "num_frames",
    "prompt_batch",
]

HUNYUAN_VIDEO_PIPELINES = ("HunyuanVideoPipeline",)
"""The pipeline classes this module runs."""


def _default(argument: str) -> Any:
    """HunyuanVideoPipeline.__call__'s default for ``argument``."""
    return call_default(HUNYUAN_VIDEO_PIPELINES[0], argument)


def default_size() -> tuple[int, int]:
    """HunyuanVideoPipeline.__call__'s own height and width defaults (720x1280)."""
    return int(_default("height")), int(_default("width"))


def num_frames(given: int | None) -> int:
    """Frames as given, else ``__call__``'s default (129); the pipeline does not round them."""
    frames = int(_default("num_frames")) if given is None else given
    if frames < 1:
        raise ConfigError(f"num_frames must be at least 1, got {frames}")
    return frames


def _crop_start() -> int:
    """The template's tokens before the prompt (``DEFAULT_PROMPT_TEMPLATE["crop_start"]``, 95): padded on top."""
    return int(_default("prompt_template")["crop_start"])


def _clip_tokens() -> int:
    """``_get_clip_prompt_embeds``'s ``max_sequence_length`` (77): CLIP's prompt is padded to it."""
    method = pipeline_class(HUNYUAN_VIDEO_PIPELINES[0])._get_clip_prompt_embeds
    return int(inspect.signature(method).parameters["max_sequence_length"].default)


def prompt_batch(tokens: int) -> dict[str, torch.Tensor]:
    """The tokenized prompt on the device: Llama's ids and mask over the template and ``tokens``, CLIP's ids."""
    llama = _crop_start() + tokens
    return {
        "input_ids": torch.zeros(1, llama, dtype=torch.long),
        "attention_mask": torch.ones(1, llama, dtype=torch.long),
        "clip_input_ids": torch.zeros(1, _clip_tokens(), dtype=torch.long),
    }


def hunyuan_video_notes(step: Generation) -> list[Assumption]:
    """What the HunyuanVideo run assumes beyond the common pipeline notes."""
    return [
        Assumption(
            name="hunyuan_video",
            detail=f"{step.run.num_frames} frames at {step.run.height}x{step.run.width}; Llama over the template's "
            f"{_crop_start()} tokens and max_sequence_length={step.run.max_sequence_length} (the prompt taken to "
            f"fill them), every layer's hidden state kept; CLIP's pooled output at {_clip_tokens()} tokens; guidance "
            f"{step.run.guidance_scale} as an embedding, one transformer call per step (no negative prompt: true CFG off)",
        )
    ]


def encode_prompt(step: Generation, program: Program) -> dict[str, torch.Tensor]:
    """``_get_llama_prompt_embeds`` (the third-from-last hidden state, cropped) and ``_get_clip_prompt_embeds`` (pooled),
    repeated per video, then cast to the transformer's dtype."""
    n = step.run.num_images
    llama: Any = program.modules["text_encoder"]
    clip: Any = program.modules["text_encoder_2"]
    transformer_dtype = next(program.modules["transformer"].parameters()).dtype
    crop_start = _crop_start()
    step.use("text_encoder")
    ids, mask = program.batch["input_ids"], program.batch["attention_mask"]
    out = llama(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    prompt_embeds = out.hidden_states[-3].to(dtype=llama.dtype)
    del out
    prompt_embeds, mask = prompt_embeds[:, crop_start:], mask[:, crop_start:]
    _, seq_len, _ = prompt_embeds.shape
    prompt_embeds = prompt_embeds.repeat(1, n, 1).view(n, seq_len, -1)
    mask = mask.repeat(1, n).view(n, seq_len)
    step.use("text_encoder_2")
    pooled = clip(program.batch["clip_input_ids"], output_hidden_states=False).pooler_output
    pooled = pooled.repeat(1, n).view(n, -1)
    return {
        "encoder_hidden_states": prompt_embeds.to(transformer_dtype),
        "encoder_attention_mask": mask.to(transformer_dtype),
        "pooled_projections": pooled.to(transformer_dtype),
    }


def denoise(step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """``prepare_latents`` (fp32), the guidance embedding's input, the transformer once per traced step on the latents
    cast to its dtype, the scheduler's step."""
    pipeline_class(HUNYUAN_VIDEO_PIPELINES[0])  # first: importing its module quietly
    from diffusers.pipelines.hunyuan_video.pipeline_hunyuan_video import retrieve_timesteps

    transformer: Any = program.modules["transformer"]
    vae: Any = program.modules["vae"]
    prompt_embeds = embeds["encoder_hidden_states"]
    device, dtype = prompt_embeds.device, prompt_embeds.dtype
    if step.run.height % 16 or step.run.width % 16:
        raise ConfigError(f"HunyuanVideoPipeline needs height and width divisible by 16, got {step.run.height}x{step.run.width}")
    assert step.run.num_frames is not None, "the pipeline call sets HunyuanVideo's num_frames"
    steps = step.run.num_inference_steps
    sigmas = np.linspace(1.0, 0.0, steps + 1)[:-1].tolist()  # the pipeline passes the array; the host keeps either
    scheduler = step.scheduler
    timesteps, _ = retrieve_timesteps(scheduler, steps, "cpu", sigmas=sigmas)  # kept on the host
    spatial, temporal = vae.spatial_compression_ratio, vae.temporal_compression_ratio
    shape = (
        step.run.num_images,
        transformer.config.in_channels,
        (step.run.num_frames - 1) // temporal + 1,
        step.run.height // spatial,
        step.run.width // spatial,
    )
    latents = torch.randn(shape, device=device, dtype=torch.float32)
    guidance = torch.tensor([step.run.guidance_scale] * latents.shape[0], dtype=dtype, device=device) * 1000.0
    scheduler.set_begin_index(0)
    step.use("transformer")
    for t in timesteps[: step.steps_traced]:
        latent_model_input = latents.to(dtype)
        timestep = t.expand(latents.shape[0]).to(device=device, dtype=latents.dtype)
        with transformer.cache_context("cond"):
            noise_pred = transformer(
                hidden_states=latent_model_input,
                timestep=timestep,
                encoder_hidden_states=prompt_embeds,
                encoder_attention_mask=embeds["encoder_attention_mask"],
                pooled_projections=embeds["pooled_projections"],
                guidance=guidance,
                attention_kwargs=None,
                return_dict=False,
            )[0]
        latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
    embeds["guidance"] = guidance  # a __call__ local: alive through the decode
    return latents


def decode(step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
    """The latents cast to the VAE's dtype over its scaling factor, ``vae.decode``, then ``postprocess_video``'s device
    part per video."""
    vae: Any = program.modules["vae"]
    step.use("vae")
    latents = latents.to(vae.dtype) / vae.config.scaling_factor
    video = vae.decode(latents, return_dict=False)[0]
    return postprocess_video(video, vae.spatial_compression_ratio)
