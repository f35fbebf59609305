"""FluxKontextPipeline traced as its ``__call__`` runs it: the reference image's tokens after the noise tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.validation.measure import RealRun
from vramsim.workload.build import build_program
from vramsim.workload.diffusion.residency import Residency
from vramsim.workload.diffusion.spec import pipeline_class

TINY_KONTEXT = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-flux-kontext")
_RUN: dict[str, Any] = {"task": "generate", "num_inference_steps": 2}


def _transformer_inputs(**options: Any) -> list[dict[str, Any]]:
    """The shapes the transformer is called with, each traced step, the program run on meta."""
    program = build_program(TINY_KONTEXT, SimulationConfig(device="cpu", **_RUN, **options), device="meta")
    calls: list[dict[str, Any]] = []

    def record(_: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        calls.append({k: tuple(kwargs[k].shape) for k in ("hidden_states", "img_ids")})

    program.modules["transformer"].register_forward_pre_hook(record, with_kwargs=True)
    program.step(program, RealRun())  # type: ignore[arg-type]
    return calls


def test_the_transformer_sees_the_noise_and_the_reference_tokens() -> None:
    """768x1360 asked, two images: 48 * 85 = 4,080 noise tokens (2x2 patches of the 8x VAE's 4-channel latents) and, the
    reference resized to 752x1392, 47 * 87 = 4,089 reference tokens, one copy per image; ids for both."""
    calls = _transformer_inputs(height=768, width=1360, num_images=2)
    assert calls == [{"hidden_states": (2, 4_080 + 4_089, 16), "img_ids": (4_080 + 4_089, 3)}] * 2


def test_the_call_takes_the_pipelines_sizes() -> None:
    """``max_area`` rescales a 512x512 ask to 1024x1024; the reference is resized to the nearest preferred resolution.
    The VAE's row says it encodes as well as decodes."""
    report = simulate(TINY_KONTEXT, device="cpu", height=512, width=512, **_RUN)
    options = report.options
    assert (options["height"], options["width"], options["reference_size"]) == (1024, 1024, (1024, 1024))
    assert {c.name: c.phase for c in report.components}["vae"] == "encode_image, decode"


def test_model_offload_follows_accelerates_chain() -> None:
    """The VAE's hook offloads the transformer (the component before it), not T5: T5 and the VAE share the device
    through the encode, the VAE and the transformer through the denoising."""
    modules: dict[str, torch.nn.Module] = {
        name: torch.nn.Linear(4, 4) for name in ("text_encoder", "text_encoder_2", "transformer", "vae")
    }
    sequence = tuple(pipeline_class("FluxKontextPipeline").model_cpu_offload_seq.split("->"))
    residency = Residency(mode="model", modules=modules, sequence=sequence)

    def resident() -> set[str]:
        return {name for name, m in modules.items() if next(m.parameters()).stride() != (0, 0)}

    for name in ("text_encoder", "text_encoder_2", "vae"):
        residency.use(name)
    assert resident() == {"text_encoder_2", "vae"}
    residency.use("transformer")
    assert resident() == {"transformer", "vae"}
    residency.use("vae")
    assert resident() == {"vae"}
    residency.release()
    assert resident() == set()
