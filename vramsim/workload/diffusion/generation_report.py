"""What a pipeline's generation tells the report: the phase each component runs in, and what the run assumes."""

from __future__ import annotations

import torch

from vramsim.results.report import Assumption
from vramsim.workload.diffusion import cogvideox, flux, hunyuan_video, ltx, pixart, qwen_image, sd3, wan
from vramsim.workload.diffusion.components import has_scheduler_config
from vramsim.workload.diffusion.generation import Generation
from vramsim.workload.diffusion.spec import diffusers_version
from vramsim.workload.diffusion.stable_diffusion import upcasts_vae
from vramsim.workload.quantization.diffusers_formats import diffusers_format_notes

__all__ = ["COMPONENT_PHASES", "generation_notes", "generation_phases"]

COMPONENT_PHASES = {
    "text_encoder": "encode_prompt",
    "text_encoder_2": "encode_prompt",
    "text_encoder_3": "encode_prompt",
    "unet": "denoise",
    "transformer": "denoise",
    "transformer_2": "denoise",
    "vae": "decode",
}
"""The pipeline phase each component runs in (what ``--json``'s ``components`` calls it)."""


ENCODING_VAE_PHASES = "encode_image, decode"
"""The VAE's phases where the pipeline also encodes an image with it (Kontext's reference, in ``prepare_latents``)."""


def generation_phases(step: Generation, modules: dict[str, torch.nn.Module]) -> dict[str, str]:
    """The pipeline's components with the phase each runs in."""
    phases = {name: COMPONENT_PHASES[name] for name in modules}
    if step.run.reference_size is not None:
        phases["vae"] = ENCODING_VAE_PHASES
    return phases


def generation_notes(step: Generation, modules: dict[str, torch.nn.Module]) -> list[Assumption]:
    """What the pipeline run assumes, for the report."""
    return [*_call_notes(step, modules), *_family_notes(step, modules), *_setup_notes(step, modules)]


def _call_notes(step: Generation, modules: dict[str, torch.nn.Module]) -> list[Assumption]:
    """What every pipeline's call assumes: the pipeline driven, the steps traced, the scheduler kept on the host."""
    spec, run = step.spec, step.run
    dtype = str(next(modules[spec.denoiser].parameters()).dtype).removeprefix("torch.")
    return [
        Assumption(
            name="pipeline",
            detail=f"{spec.class_name}.__call__ driven component by component (diffusers "
            f"{diffusers_version()}): weights in {dtype}, one prompt, {run.num_images} image(s), "
            f"{run.height}x{run.width}" + ("" if spec.class_name in flux.FLUX_PIPELINES else f", guidance {run.guidance_scale}"),
        ),
        Assumption(
            name="denoising_steps_traced",
            detail=f"{step.steps_traced} of {run.num_inference_steps} denoising steps "
            "traced: every step runs the same tensors (and the scheduler's history is full by then), so the "
            "rest repeat the last one's memory",
        ),
        Assumption(
            name="scheduler_on_host",
            detail="the scheduler's timesteps and sigmas are kept on the host "
            "(a few hundred bytes; the pipeline puts them on the device)",
        ),
    ] + (
        []
        if has_scheduler_config(spec)
        else [
            Assumption(
                name="scheduler_defaults",
                detail=f"{type(step.scheduler).__name__} built with its own defaults: the folder holds no "
                "scheduler config (the timesteps stay on the host, so the memory does not depend on it)",
            )
        ]
    )


def _family_notes(step: Generation, modules: dict[str, torch.nn.Module]) -> list[Assumption]:
    """What the pipeline's own ``__call__`` assumes beyond every pipeline's (SD and SDXL: nothing more)."""
    name, denoiser = step.spec.class_name, modules[step.spec.denoiser]
    if name in flux.FLUX_PIPELINES:
        return flux.flux_notes(step.spec, step, denoiser)
    if name in sd3.SD3_PIPELINES:
        return sd3.sd3_notes(step)
    if name in pixart.PIXART_PIPELINES:
        return pixart.pixart_notes(step, denoiser)
    if name in wan.WAN_PIPELINES:
        return wan.wan_notes(step)
    if name in ltx.LTX_PIPELINES:
        return ltx.ltx_notes(step, modules["vae"])
    if name in cogvideox.COGVIDEOX_PIPELINES:
        return cogvideox.cogvideox_notes(step)
    if name in hunyuan_video.HUNYUAN_VIDEO_PIPELINES:
        return hunyuan_video.hunyuan_video_notes(step)
    if name in qwen_image.QWEN_IMAGE_PIPELINES:
        return qwen_image.qwen_image_notes(step)
    return []


def _setup_notes(step: Generation, modules: dict[str, torch.nn.Module]) -> list[Assumption]:
    """What the components' setup assumes: no safety checker, the offload's hooks, the VAE's upcast."""
    notes = []
    if step.spec.has("safety_checker"):
        notes.append(Assumption(name="no_safety_checker", detail="the safety checker is not loaded (safety_checker=None)"))
    if step.residency is not None:
        how = {
            "model": "each component's weights are on the device only while it runs (enable_model_cpu_offload)",
            "sequential": "each module's own weights are on the device only during its forward (enable_sequential_cpu_offload)",
        }[step.residency.mode]
        notes.append(Assumption(name="cpu_offload", detail=f"{how}; the copies' host memory and PCIe time are not counted"))
    hooks = step.weight_hooks
    if hooks is not None and hooks.layerwise_casting is not None:
        notes.append(
            Assumption(
                name="layerwise_casting",
                detail=f"the {step.spec.denoiser}'s layers are stored in {hooks.layerwise_casting} and each cast to the "
                "compute dtype for its forward and back (enable_layerwise_casting: diffusers' hooks and skip patterns)",
            )
        )
    if hooks is not None and hooks.group_offload is not None:
        notes.append(
            Assumption(
                name="group_offload",
                detail=f"every component group-offloaded ({hooks.group_offload}, diffusers' hooks, no CUDA streams): "
                "only the groups the hooks have onloaded are on the device; host memory and PCIe time are not counted",
            )
        )
    for name in step.spec.denoisers:
        notes += diffusers_format_notes(modules[name]) if name in modules else []
    if upcasts_vae(modules["vae"], step.spec):
        notes.append(
            Assumption(
                name="vae_upcast",
                detail="the VAE is cast to fp32 for the decode and back "
                "(config force_upcast, as the pipeline does for fp16 weights)",
            )
        )
    return notes
