"""A diffusion pipeline's program: one generation, or one training step of its denoiser (``--task train``)."""

from __future__ import annotations

from typing import Literal

from vramsim.config import SimulationConfig
from vramsim.errors import UnsupportedError
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.workload.diffusion.pipelines import build_pipeline_program
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.diffusion.training import build_training_program
from vramsim.workload.models import PipelineIndex
from vramsim.workload.program import Program

__all__ = ["build_diffusion_program"]


def build_diffusion_program(
    found: PipelineIndex,
    config: SimulationConfig,
    *,
    device: str,
    emulation: KernelEmulation | None,
    foreach: bool,
    checkpointing: Literal["marked", "applied"],
) -> Program:
    """The program of the pipeline ``found``, for the task ``config`` names."""
    if config.compile:
        raise UnsupportedError("compile is modelled for a single model, not a diffusion pipeline's components yet")
    if config.recipe != "trainer" or config.optimizer_in_backward:
        raise UnsupportedError(
            "recipe and optimizer_in_backward shape a language model's training run; a diffusion pipeline trains as "
            "diffusers' scripts do (vramsim/workload/diffusion/training.py)"
        )
    spec = PipelineSpec.of(found)
    if config.task == "train":
        return build_training_program(
            spec, config, device=device, emulation=emulation, foreach=foreach, checkpointing=checkpointing
        )
    return build_pipeline_program(spec, config, device=device)
