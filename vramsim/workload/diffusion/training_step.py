"""One training step of a pipeline's denoiser, and the recipe that says how a pipeline's script trains it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from vramsim.estimators.assumptions import SCRIPT_LORA_TARGETS
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.diffusion.components import vae_config
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.program import Program, StepObserver, clip_gradients, optimizer_step, tensors_in

__all__ = ["Recipe", "TrainingStep"]


@dataclass(frozen=True, slots=True)
class Recipe:
    """How a pipeline's denoiser is trained: the script that does it and what differs between pipelines."""

    script: str
    """The diffusers example whose step this is."""
    forward: Callable[[TrainingStep, Program, torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]
    """Noised latents and the prompt's embeddings in, the loss out (with the denoiser's forward under autocast)."""
    encode: Callable[[Program], dict[str, torch.Tensor]]
    """The prompt through the frozen text encoders (``encode_prompt``)."""
    vae_fp32: bool = False
    """The script keeps the VAE in fp32 whatever ``weight_dtype`` is (SDXL's: fp16 VAE latents overflow)."""
    noise_scheduler: str | None = None
    """The scheduler class the script builds from the pipeline's scheduler config (the UNet scripts'
    ``DDPMScheduler.from_pretrained(..., subfolder="scheduler")``); None: the pipeline's own class."""
    lora_targets: tuple[str, ...] = SCRIPT_LORA_TARGETS
    """The modules the script's LoRA adapts when no ``--lora-targets`` are given."""
    max_sequence_length: int | None = None
    """T5's prompt tokens when ``max_sequence_length`` is not given: the script's default (SD3's 77); None: FLUX's
    pipeline default (``flux.max_sequence_length``), or no T5."""


@dataclass(kw_only=True)
class TrainingStep:
    """One optimizer step of the denoiser; the frozen components run without gradients."""

    spec: PipelineSpec
    recipe: Recipe
    scheduler: Any
    weight_dtype: torch.dtype
    cached: tuple[str, ...]
    """What is cached instead of run: ``latents``, ``text_embeddings``."""
    lora: bool
    resolution: tuple[int, int]
    """The pixel batch's height and width."""
    ema: Any = None
    """diffusers' ``EMAModel`` over the trained weights (``--use_ema``); None without it."""

    def __call__(self, program: Program, observer: StepObserver) -> None:
        denoiser = program.modules[self.spec.denoiser]
        observer.set_phase(Phase.FORWARD)
        with torch.no_grad():
            latents = self._latents(program)
            embeds = self._embeds(program)
        loss = self.recipe.forward(self, program, latents, embeds)
        del latents, embeds
        observer.set_phase(Phase.BACKWARD)
        (program.scaler.scale(loss) if program.scaler is not None else loss).backward()
        del loss
        params = [(name, p) for name, p in denoiser.named_parameters() if p.grad is not None]
        observer.mark_owned(((name, p.grad) for name, p in params), Category.GRADIENT)
        observer.set_phase(Phase.OPTIMIZER)
        if program.max_grad_norm is not None:  # set for every pipeline training program
            clip_gradients(program, [p for _, p in params], program.max_grad_norm)
        assert program.optimizer is not None, "a training program has an optimizer"
        optimizer_step(program.optimizer, program.scaler)
        names = {id(p): name for name, p in denoiser.named_parameters()}
        observer.mark_owned(
            ((names.get(id(p), ""), t) for p, state in program.optimizer.state.items() for t in tensors_in(state)),
            Category.OPTIMIZER_STATE,
        )
        if program.scaler is not None:
            observer.mark(tensors_in(program.scaler), Category.OPTIMIZER_STATE)
        program.optimizer.zero_grad()  # the scripts' optimizer.zero_grad(): set_to_none, torch's default
        if self.ema is not None:  # after the optimizer step, as train_text_to_image.py calls ema_unet.step
            self.ema.step(denoiser.parameters())
            shadows = zip((name for name, _ in denoiser.named_parameters()), self.ema.shadow_params, strict=True)
            observer.mark_owned(shadows, Category.OPTIMIZER_STATE)

    def _latents(self, program: Program) -> torch.Tensor:
        """``vae.encode(pixel_values).latent_dist.sample()``, shifted and scaled, in ``weight_dtype``; cached:
        the stored distribution's ``sample()``."""
        if "latents" in self.cached:
            sample = program.batch["latent_dist"].sample()
        else:
            vae: Any = program.modules["vae"]
            sample = vae.encode(program.batch["pixel_values"].to(dtype=vae.dtype)).latent_dist.sample()
        config = vae_config(self.spec)
        shift = config.get("shift_factor") or 0.0
        latents = (sample - shift) * config["scaling_factor"] if shift else sample * config["scaling_factor"]
        return latents.to(self.weight_dtype)

    def _embeds(self, program: Program) -> dict[str, torch.Tensor]:
        """The prompt's embeddings for each image: encoded now, or the precomputed ones repeated to the batch."""
        if "text_embeddings" not in self.cached:
            return self.recipe.encode(program)
        n = _batch_size(program)
        cached = {key[len("cached_") :]: value for key, value in program.batch.items() if key.startswith("cached_")}
        return {key: value.repeat(n, *([1] * (value.ndim - 1))) if key != "txt_ids" else value for key, value in cached.items()}


def _batch_size(program: Program) -> int:
    """The images in the batch: the pixel batch's, or the cached latent distribution's."""
    source = program.batch.get("pixel_values")
    return int(source.shape[0] if source is not None else program.batch["latent_dist"].mean.shape[0])
