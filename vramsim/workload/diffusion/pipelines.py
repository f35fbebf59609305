"""Diffusion pipelines by id: their components built from model_index.json, run as the pipeline runs them.

A pipeline folder (bundled in model_zoo, or a local one laid out as on the Hub) holds
``model_index.json`` and one folder per component. The components are built on meta (or the
CPU, to measure) and a ``Program`` runs them as diffusers' pipeline ``__call__`` does: prompt
encoding, the denoising loop with classifier-free guidance (the latents doubled), the VAE decode
(upcast to fp32 where the pipeline does it) and the on-device part of post-processing. The
pipeline class itself is not run: it needs tokenizers and weights; its tensors are the same.
This module picks each pipeline's family and builds its program; ``generation.py`` runs the call.
SD's and SDXL's CLIP prompts, UNet loop and decode are in ``stable_diffusion.py``;
FLUX's own prompt encoding, packed latents and decode shift are in ``flux.py`` (Kontext's reference image in
``flux_kontext.py``); SD3's three-encoder prompt
and decode shift in ``sd3.py``; PixArt-Sigma's masked T5 prompt and resolution binning in ``pixart.py``;
Wan's video latents, two-call guidance and 3D decode in ``wan.py``; LTX-Video's packed video latents and
timestep-aware decode in ``ltx.py``; CogVideoX's unmasked T5 prompt, frame-major latents and 3D decode in
``cogvideox.py``; HunyuanVideo's templated Llama and pooled CLIP prompt and embedded guidance in
``hunyuan_video.py``; Qwen-Image's templated Qwen2.5-VL prompt and one-frame decode in ``qwen_image.py``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import torch

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import WAN_VAE_DTYPE
from vramsim.workload.diffusion import (
    cogvideox,
    flux,
    flux_kontext,
    hunyuan_video,
    ltx,
    pixart,
    qwen_image,
    sd3,
    stable_diffusion,
    wan,
)
from vramsim.workload.diffusion.attention import (
    eager_attention,
    set_attention_processors,
    set_eager_attention,
    slice_attention,
)
from vramsim.workload.diffusion.components import diffusers_model, load_scheduler, replaced_vae
from vramsim.workload.diffusion.generation import Family, Generation, PipelineCall
from vramsim.workload.diffusion.generation_report import generation_notes, generation_phases
from vramsim.workload.diffusion.quantization import quantize_components
from vramsim.workload.diffusion.residency import Residency
from vramsim.workload.diffusion.spec import PipelineSpec, call_default, pipeline_class
from vramsim.workload.diffusion.weight_hooks import apply_weight_hooks
from vramsim.workload.models import build_model, load_config
from vramsim.workload.program import Program

__all__ = ["FAMILIES", "PIPELINES_RUN", "build_pipeline_program"]

_FAMILY_CLASSES: tuple[tuple[Family, tuple[str, ...]], ...] = (
    (stable_diffusion, stable_diffusion.SD_PIPELINES),
    (flux, flux.FLUX_PIPELINES),
    (sd3, sd3.SD3_PIPELINES),
    (pixart, pixart.PIXART_PIPELINES),
    (wan, wan.WAN_PIPELINES),
    (ltx, ltx.LTX_PIPELINES),
    (cogvideox, cogvideox.COGVIDEOX_PIPELINES),
    (hunyuan_video, hunyuan_video.HUNYUAN_VIDEO_PIPELINES),
    (qwen_image, qwen_image.QWEN_IMAGE_PIPELINES),
)
"""Each family module and the pipeline classes whose ``__call__`` it runs."""

FAMILIES: dict[str, Family] = {name: family for family, names in _FAMILY_CLASSES for name in names}
"""The module holding each pipeline class's own ``encode_prompt``, ``denoise`` and ``decode``."""

PIPELINES_RUN = tuple(FAMILIES)
"""Pipeline classes whose ``__call__`` is run."""


def build_pipeline_program(spec: PipelineSpec, config: SimulationConfig, *, device: str) -> Program:
    """The pipeline's components on ``device`` and the step that runs one generation."""
    if config.task != "generate":
        raise ConfigError(f"{spec.class_name} is a diffusion pipeline: use task='generate' (got task='{config.task}')")
    family = FAMILIES.get(spec.class_name)
    if family is None:
        raise UnsupportedError(
            f"{spec.class_name} is not run yet (its components' parameters are counted by `vramsim models`); "
            f"pipelines run: {', '.join(PIPELINES_RUN)}"
        )
    modules = _components(spec, config, device)
    weight_hooks = apply_weight_hooks(spec, modules, config, device=device, dtype=_pipeline_dtype(spec, config))
    sequence = tuple(pipeline_class(spec.class_name).model_cpu_offload_seq.split("->"))
    residency = Residency(mode=config.offload, modules=modules, sequence=sequence) if config.offload != "no" else None
    run = _pipeline_call(config, spec, modules[spec.denoiser], modules["vae"])
    batch = _prompt_batch(spec, run, device)
    step = Generation(
        spec=spec,
        run=run,
        scheduler=load_scheduler(spec),
        family=family,
        residency=residency,
        weight_hooks=weight_hooks,
    )
    return Program(
        modules=modules,
        step=step,
        batch=batch,
        loss=None,
        optimizer=None,
        autocast=contextlib.nullcontext,
        max_new_tokens=0,
        steps=config.steps,
        phases=generation_phases(step, modules),
        notes=generation_notes(step, modules),
        options=run.options(),
    )


def _components(spec: PipelineSpec, config: SimulationConfig, device: str) -> dict[str, torch.nn.Module]:
    """The text encoders, the denoiser and the VAE in the pipeline's dtype, quantized and with their attention as asked."""
    eager = eager_attention(spec, config)
    dtype = _pipeline_dtype(spec, config)
    modules: dict[str, torch.nn.Module] = {}
    for name in ("text_encoder", "text_encoder_2", "text_encoder_3"):
        if spec.has(name):
            modules[name] = build_model(
                load_config(spec.component(name)), device=device, dtype=dtype, attn_implementation=config.attn_implementation
            ).eval()
    for name in spec.denoisers:
        modules[name] = diffusers_model(spec, name, device, dtype)
    if config.quantization is not None:
        quantize_components(spec, modules, config, device, dtype)
    elif config.quantized_components is not None:
        raise ConfigError("quantized_components names what quantization quantizes; give a quantization too")
    is_wan = spec.class_name in wan.WAN_PIPELINES
    vae_dtype = getattr(torch, WAN_VAE_DTYPE) if is_wan else dtype
    vae = (
        diffusers_model(spec, "vae", device, vae_dtype)
        if config.vae is None
        else replaced_vae(spec, config.vae, device, vae_dtype)
    )
    if eager:
        set_eager_attention(spec, [modules[name] for name in spec.denoisers], vae)
    if config.attention_processor is not None:
        set_attention_processors(spec, {**modules, "vae": vae}, config.attention_processor)
    if config.attention_slicing is not None:
        slice_attention(spec, modules, config.attention_slicing)
    if config.vae_tiling:
        vae.enable_tiling()
    if config.vae_slicing:
        vae.enable_slicing()
    modules["vae"] = vae
    return modules


def _prompt_batch(spec: PipelineSpec, run: PipelineCall, device: str) -> dict[str, torch.Tensor]:
    """The tokenized prompt on ``device``: one prompt, padded as the pipeline's tokenizers pad it."""
    name, tokens = spec.class_name, run.max_sequence_length
    with torch.device(device):
        if name in (*pixart.PIXART_PIPELINES, *wan.WAN_PIPELINES):  # T5 alone: padded to max_sequence_length, masked
            assert tokens is not None, "_pipeline_call sets PixArt's and Wan's max_sequence_length"
            return pixart.prompt_batch(tokens)
        if name in cogvideox.COGVIDEOX_PIPELINES:  # T5 over max_sequence_length, no mask
            assert tokens is not None, "_pipeline_call sets CogVideoX's max_sequence_length"
            return {"input_ids": torch.zeros(1, tokens, dtype=torch.long)}
        if name in hunyuan_video.HUNYUAN_VIDEO_PIPELINES:  # Llama over its template and the prompt, CLIP
            assert tokens is not None, "_pipeline_call sets HunyuanVideo's max_sequence_length"
            return hunyuan_video.prompt_batch(tokens)
        if name in qwen_image.QWEN_IMAGE_PIPELINES:  # Qwen2.5-VL over its template and the prompt
            assert tokens is not None, "_pipeline_call sets Qwen-Image's max_sequence_length"
            return qwen_image.prompt_batch(tokens)
        if name in ltx.LTX_PIPELINES:  # T5 over max_sequence_length, its bool mask for the transformer
            assert tokens is not None, "_pipeline_call sets LTX's max_sequence_length"
            return ltx.prompt_batch(tokens)
        batch = {"input_ids": torch.zeros(1, spec.max_tokens("tokenizer"), dtype=torch.long)}  # one prompt, padded
        if tokens is not None:  # FLUX's and SD3's T5 prompt, padded to max_sequence_length
            batch["t5_input_ids"] = torch.zeros(1, tokens, dtype=torch.long)
    return batch


def _pipeline_dtype(spec: PipelineSpec, config: SimulationConfig) -> torch.dtype:
    """``--dtype``, else the text encoder's stored ``torch_dtype`` (the checkpoint's own), else fp32."""
    assert not isinstance(config.dtype, str), "SimulationConfig resolves dtype names"
    if config.dtype is not None:
        return config.dtype
    name = "text_encoder_2" if spec.has("text_encoder_2") else "text_encoder"
    stored = json.loads((spec.component(name) / "config.json").read_text()).get("torch_dtype")
    return getattr(torch, stored) if stored in ("float16", "bfloat16", "float32") else torch.float32


def _pipeline_call(config: SimulationConfig, spec: PipelineSpec, denoiser: torch.nn.Module, vae: torch.nn.Module) -> PipelineCall:
    """``height = height or default_sample_size * vae_scale_factor``, as the pipelines default them; any other
    argument left unset takes the default of the pipeline's ``__call__``."""
    denoiser_config: Any = denoiser.config
    vae_config: Any = vae.config
    is_flux, is_wan = spec.class_name in flux.FLUX_PIPELINES, spec.class_name in wan.WAN_PIPELINES
    is_ltx, is_cog = spec.class_name in ltx.LTX_PIPELINES, spec.class_name in cogvideox.COGVIDEOX_PIPELINES
    is_hunyuan = spec.class_name in hunyuan_video.HUNYUAN_VIDEO_PIPELINES
    is_video = is_wan or is_ltx or is_cog or is_hunyuan
    is_qwen = spec.class_name in qwen_image.QWEN_IMAGE_PIPELINES
    if is_cog:  # the transformer's sample size times the VAE's spatial factor
        default_height, default_width = cogvideox.default_size(denoiser, vae)
    elif is_qwen:  # its default_sample_size times its VAE's factor
        default_height, default_width = qwen_image.default_size(vae)
    elif is_video:  # the video pipelines' own defaults, not a sample size's
        own = wan if is_wan else ltx if is_ltx else hunyuan_video
        default_height, default_width = own.default_size()
    else:
        sample_size = flux.DEFAULT_SAMPLE_SIZE if is_flux else denoiser_config.sample_size
        default_height = default_width = sample_size * 2 ** (len(vae_config.block_out_channels) - 1)
    if config.num_frames is not None and not is_video:
        raise ConfigError(f"num_frames is a video pipeline's argument; {spec.class_name} makes images")
    given = {"num_inference_steps": config.num_inference_steps, "guidance_scale": config.guidance_scale}
    called = {name: call_default(spec.class_name, name) if value is None else value for name, value in given.items()}
    if is_qwen:  # guidance is its true_cfg_scale
        called["guidance_scale"] = qwen_image.guidance_scale(config.guidance_scale)
    height, width, reference = config.height or default_height, config.width or default_width, None
    if spec.class_name in flux_kontext.KONTEXT_PIPELINES:  # max_area's output size, the resized reference image's
        height, width, reference = flux_kontext.call_sizes(height, width, 2 ** (len(vae_config.block_out_channels) - 1))
    return PipelineCall(
        height=height,
        width=width,
        num_inference_steps=int(called["num_inference_steps"]),
        guidance_scale=float(called["guidance_scale"]),
        num_images=config.num_images,
        max_sequence_length=_t5_tokens(config, spec, denoiser),
        num_frames=_num_frames(config, spec, denoiser, vae) if is_video else None,
        reference_size=reference,
        defaulted=tuple(
            name for name, value in {**given, "max_sequence_length": config.max_sequence_length}.items() if value is None
        ),
    )


def _num_frames(config: SimulationConfig, spec: PipelineSpec, denoiser: torch.nn.Module, vae: torch.nn.Module) -> int:
    """A video pipeline's frames, as given or as its ``__call__`` defaults and rounds them."""
    if spec.class_name in wan.WAN_PIPELINES:
        return wan.num_frames(config.num_frames, vae)
    if spec.class_name in ltx.LTX_PIPELINES:
        return ltx.num_frames(config.num_frames)
    if spec.class_name in hunyuan_video.HUNYUAN_VIDEO_PIPELINES:
        return hunyuan_video.num_frames(config.num_frames)
    return cogvideox.num_frames(config.num_frames, denoiser)


def _t5_tokens(config: SimulationConfig, spec: PipelineSpec, denoiser: torch.nn.Module) -> int | None:
    """The T5 prompt's padded length, as given or as the pipeline defaults it; None for a pipeline without T5."""
    is_flux, is_sd3 = spec.class_name in flux.FLUX_PIPELINES, spec.class_name in sd3.SD3_PIPELINES
    is_pixart = spec.class_name in pixart.PIXART_PIPELINES
    is_video = spec.class_name in (
        *wan.WAN_PIPELINES,
        *ltx.LTX_PIPELINES,
        *cogvideox.COGVIDEOX_PIPELINES,
        *hunyuan_video.HUNYUAN_VIDEO_PIPELINES,
    )
    is_qwen = spec.class_name in qwen_image.QWEN_IMAGE_PIPELINES
    if config.max_sequence_length is not None and not (is_flux or is_sd3 or is_pixart or is_video or is_qwen):
        raise ConfigError(
            "max_sequence_length pads FLUX's T5 prompt (and SD3's, PixArt's, Wan's, LTX's, CogVideoX's; HunyuanVideo's "
            f"Llama prompt, Qwen-Image's); {spec.class_name} has no such argument"
        )
    if is_flux:
        return flux.max_sequence_length(denoiser, config.max_sequence_length)
    if is_sd3:
        return sd3.max_sequence_length(config.max_sequence_length)
    if is_pixart:
        return pixart.max_sequence_length(config.max_sequence_length)
    if is_qwen:
        return qwen_image.max_sequence_length(config.max_sequence_length)
    if is_video:
        return config.max_sequence_length or int(call_default(spec.class_name, "max_sequence_length"))
    return None
