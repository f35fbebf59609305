"""What a pipeline's training step tells the report: the phase each component runs in, and what the step assumes."""

from __future__ import annotations

from typing import Any

import torch

from vramsim.results.report import Assumption
from vramsim.workload.diffusion.training_step import TrainingStep

__all__ = ["TRAINING_PHASES", "training_notes", "training_phases"]

TRAINING_PHASES = {
    "text_encoder": "encode_prompt",
    "text_encoder_2": "encode_prompt",
    "text_encoder_3": "encode_prompt",
    "vae": "encode_latents",
    "unet": "train",
    "transformer": "train",
}
"""The phase of the training step each component runs in (``--json``'s ``components``)."""


def training_phases(modules: dict[str, torch.nn.Module]) -> dict[str, str]:
    """The training program's components with the phase each runs in."""
    return {name: TRAINING_PHASES[name] for name in modules}


def training_notes(step: TrainingStep, denoiser: Any, max_grad_norm: float) -> list[Assumption]:
    """What the pipeline's training step assumes, for the report."""
    return [*_step_notes(step, denoiser, max_grad_norm), *_option_notes(step, denoiser)]


def _step_notes(step: TrainingStep, denoiser: Any, max_grad_norm: float) -> list[Assumption]:
    """What every training step assumes: the script's casts, the step's locals released, the gradients clipped."""
    weight = str(step.weight_dtype).removeprefix("torch.")
    trained = "LoRA adapters on the frozen denoiser" if step.lora else f"the whole {type(denoiser).__name__} in fp32"
    return [
        Assumption(
            name="pipeline_training",
            detail=f"one training step of {step.spec.class_name}'s denoiser as diffusers' "
            f"{step.recipe.script} runs it: {trained}; frozen components in {weight} (weight_dtype)"
            + (", the VAE in fp32" if step.recipe.vae_fp32 and "latents" not in step.cached else ""),
        ),
        Assumption(
            name="step_locals_released",
            detail="the latents, noise, noisy input and prediction are "
            "released once the loss is computed (the scripts' loop holds them until the next "
            "iteration rebinds them: a few latent-sized tensors)",
        ),
        Assumption(
            name="gradient_clipping",
            detail=f"the trained gradients clipped to norm {max_grad_norm:g} "
            "each step (the scripts' --max_grad_norm, SCRIPT_MAX_GRAD_NORM unless max_grad_norm is given)",
        ),
    ]


def _option_notes(step: TrainingStep, denoiser: Any) -> list[Assumption]:
    """What the step's options assume: the LoRA's targets, the EMA copy, the cached latents or prompt embeddings."""
    notes = []
    if step.lora:
        targets = sorted(denoiser.peft_config["default"].target_modules)
        notes.append(
            Assumption(
                name="lora_targets",
                detail=f"adapters on {', '.join(targets)} (the scripts' default "
                "target_modules unless --lora-targets names others; peft's all-linear is read as that default), "
                "init_lora_weights='gaussian'",
            )
        )
    if step.ema is not None:
        notes.append(
            Assumption(
                name="ema",
                detail="diffusers' EMAModel over the trained weights (--use_ema, foreach off as "
                "train_text_to_image.py defaults it): an fp32 copy on the device, counted with the "
                "optimizer states, updated after each optimizer step; --offload_ema and --foreach_ema "
                "are not modelled",
            )
        )
    if "latents" in step.cached:
        notes.append(
            Assumption(
                name="cache_latents",
                detail="--cache_latents: the VAE is not on the device; this batch's "
                "latent distribution is (the script caches every batch's: the dataset's images times it)",
            )
        )
    if "text_embeddings" in step.cached:
        notes.append(
            Assumption(
                name="cache_text_embeddings",
                detail="the prompt's embeddings are precomputed once and the "
                "text encoders deleted, as the DreamBooth scripts do for one instance prompt",
            )
        )
    return notes
