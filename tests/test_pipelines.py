"""Diffusion pipelines traced as their ``__call__`` runs them, on a tiny StableDiffusionXLPipeline folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramsim import Report, simulate
from vramsim.cli import main
from vramsim.errors import ConfigError, UnsupportedError

TINY = str(Path(__file__).parent / "ground_truth" / "pipelines" / "tiny-sdxl")
_RUN = {"task": "generate", "num_inference_steps": 2, "device": "cpu"}


@pytest.fixture(scope="module")
def guided() -> Report:
    """64x64, guidance 5 (the pipeline's default): the VAE decode sets the peak."""
    return simulate(TINY, height=64, width=64, **_RUN)


def test_json_names_each_component_with_its_peak_and_phase(guided: Report, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", TINY, "--task", "generate", "--height", "64", "--width", "64", "--num-inference-steps", "2",
                 "--device", "cpu", "--vae-tiling", "--json"]) == 0  # fmt: skip
    tiled = json.loads(capsys.readouterr().out)
    components = {c["name"]: c for c in tiled["components"]}
    assert {name: c["phase"] for name, c in components.items()} == {
        "text_encoder": "encode_prompt", "text_encoder_2": "encode_prompt", "unet": "denoise", "vae": "decode",
    }  # fmt: skip
    assert max(c["peak_bytes"] for c in components.values()) == tiled["peak_bytes"]
    assert tiled["options"]["guidance_scale"] == 5.0  # StableDiffusionXLPipeline's default
    assert guided.peak_at.module.startswith("vae.decoder.")
    untiled_vae = next(c.peak_bytes for c in guided.components if c.name == "vae")
    assert components["vae"]["peak_bytes"] < untiled_vae  # tiles of 16 px (sample_size) instead of the whole 64
    assert tiled["peak_bytes"] < guided.peak_bytes


def test_guidance_doubles_the_denoiser_batch(guided: Report) -> None:
    unguided = simulate(TINY, height=64, width=64, guidance_scale=1.0, **_RUN)
    unet = {r.options["guidance_scale"]: next(c.peak_bytes for c in r.components if c.name == "unet") for r in (guided, unguided)}
    assert unet[5.0] > unet[1.0]


@pytest.mark.parametrize(
    ("options", "message"),
    [({"task": "forward"}, "use --task generate"), ({"task": "generate", "height": 60}, "multiple of 8"),
     ({"task": "generate", "num_images": 0}, "num_images")],
)  # fmt: skip
def test_bad_pipeline_options_are_one_line_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        simulate(TINY, device="cpu", **options)


def test_a_pipeline_not_run_yet_says_so_in_one_line() -> None:
    with pytest.raises(UnsupportedError, match="FluxPipeline is not run yet"):
        simulate("black-forest-labs/FLUX.1-dev", task="generate", device="cpu")


def test_offload_keeps_only_the_running_component_or_layer_on_the_device() -> None:
    options = {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "device": "h100"}
    model = simulate(TINY, offload="model", **options)
    sequential = simulate(TINY, offload="sequential", **options)
    weights = {name: sum(r.parameter_bytes for r in model.layers if r.module.startswith(f"{name}.")) for name in ("unet", "vae")}
    assert model.peak_at.module.startswith("unet.")
    # the UNet's weights (each in its 512-byte allocator blocks) and not the VAE's
    assert weights["unet"] <= model.breakdown["parameters"] < weights["unet"] + weights["vae"]
    assert sequential.peak_bytes < model.peak_bytes
    assert sequential.breakdown.get("parameters", 0) < weights["unet"]
    with pytest.raises(ConfigError, match="host memory"):
        simulate(TINY, offload="model", task="generate", device="cpu")
