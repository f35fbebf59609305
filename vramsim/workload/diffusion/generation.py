"""One ``pipe(prompt)`` call as a program's step: encode, denoise, decode, each run by the pipeline's family.

A family is the module that holds one kind of pipeline's own ``__call__`` (``stable_diffusion.py``, ``flux.py``,
``sd3.py``, ``pixart.py``, ``wan.py``, ``ltx.py``, ``cogvideox.py``, ``hunyuan_video.py``, ``qwen_image.py``);
``pipelines.py`` picks it and builds the step.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import torch

from vramsim.estimators.assumptions import DENOISING_STEPS_TRACED
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.diffusion.residency import Residency
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.diffusion.weight_hooks import WeightHooks
from vramsim.workload.program import Program, StepObserver

__all__ = ["Family", "Generation", "PipelineCall"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineCall:
    """The pipeline call's arguments, the pipeline's defaults filled in."""

    height: int
    width: int
    num_inference_steps: int
    guidance_scale: float
    num_images: int
    max_sequence_length: int | None = None
    """FLUX, SD3, PixArt, the video pipelines: the T5 prompt's padded length (HunyuanVideo's Llama prompt, Qwen-Image's
    Qwen2.5-VL prompt after their templates); None for pipelines without it."""
    num_frames: int | None = None
    """Video pipelines (Wan, LTX, CogVideoX, HunyuanVideo): the frames generated, rounded as the pipeline rounds
    them; None for images."""
    reference_size: tuple[int, int] | None = None
    """FluxKontextPipeline: the reference image's height and width after the pipeline resizes it; None for pipelines
    without a reference image."""
    defaulted: tuple[str, ...] = ()
    """The arguments not given, which took the pipeline's defaults."""

    def options(self) -> dict[str, Any]:
        """The call's arguments with the pipeline's defaults filled in, for the report's ``options``."""
        return {key: value for key, value in asdict(self).items() if value is not None and key != "defaulted"}


class Family(Protocol):
    """What a family module runs of its pipeline's ``__call__``."""

    def encode_prompt(self, step: Generation, program: Program) -> dict[str, torch.Tensor]:
        """``encode_prompt``: the embeddings the denoiser reads."""

    def denoise(self, step: Generation, program: Program, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
        """The denoising loop: the latents the VAE decodes."""

    def decode(self, step: Generation, program: Program, latents: torch.Tensor) -> torch.Tensor:
        """The decode and post-processing's device part: the image (or video) leaving the device."""


@dataclass(kw_only=True)
class Generation:
    """One ``pipe(prompt)`` call: encode, denoise, decode, post-process on the device."""

    spec: PipelineSpec
    run: PipelineCall
    scheduler: Any
    family: Family
    """The module that runs this pipeline's own steps."""
    residency: Residency | None = None
    """Where the weights are under ``--offload``; None: all on the device throughout."""
    weight_hooks: WeightHooks | None = None
    """diffusers' layerwise casting and group offloading hooks (``weight_hooks.py``); None: neither asked."""

    def __call__(self, program: Program, observer: StepObserver) -> None:
        observer.set_phase(Phase.FORWARD)
        if self.residency is not None:
            self.residency.observer = observer
        hooks = self.weight_hooks
        placed = hooks.placement if hooks is not None and hooks.placement is not None else contextlib.nullcontext()
        if hooks is not None:
            hooks.observer = observer
        with torch.no_grad(), placed:
            embeds = self.family.encode_prompt(self, program)
            latents = self.family.denoise(self, program, embeds)
            image = self.family.decode(self, program, latents)  # embeds: __call__'s locals, alive through the decode
            observer.mark([image], Category.OUTPUT)
            del image, embeds
        if hooks is not None:
            hooks.observer = None
        if self.residency is not None:
            self.residency.release()
            self.residency.observer = None

    def use(self, name: str) -> None:
        """``name`` runs next: under model offload its weights come to the device."""
        if self.residency is not None:
            self.residency.use(name)

    @property
    def steps_traced(self) -> int:
        """The denoising steps run: enough for every step after them to be alike (assumptions.DENOISING_STEPS_TRACED)."""
        return min(self.run.num_inference_steps, DENOISING_STEPS_TRACED.get(type(self.scheduler).__name__, 2))

    @property
    def guided(self) -> bool:
        """Classifier-free guidance is on (the pipelines' ``do_classifier_free_guidance``)."""
        return self.run.guidance_scale > 1
