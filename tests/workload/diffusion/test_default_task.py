"""A diffusion pipeline given without a task is asked what people ask of one, a generation; ``train`` still trains."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramsim import simulate
from vramsim.cli import main

SDXL = "stabilityai/stable-diffusion-xl-base-1.0"
TINY = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-sdxl")
SMALL = ["--height", "64", "--width", "64", "--device", "cpu", "--quiet"]


def _header(capsys: pytest.CaptureFixture[str], pipeline: str, *args: str) -> str:
    """The report's first lines (the model, its task and sizes; the settings), as ``vramsim trace`` prints them."""
    assert main(["trace", pipeline, *SMALL, *args]) == 0
    return " ".join(capsys.readouterr().out.split("Peak allocated")[0].split())


def test_bundled_sdxl_without_a_task_generates(capsys: pytest.CaptureFixture[str]) -> None:
    """SDXL with no --task: one generation (denoising steps, no optimizer), and the header says task=generate."""
    header = _header(capsys, SDXL, "--num-inference-steps", "1")
    assert header.startswith(f"{SDXL} task=generate target=cpu 64x64 steps=1 images=1 guidance=5.0"), header
    assert "optimizer" not in header


def test_sdxl_trains_when_told(capsys: pytest.CaptureFixture[str]) -> None:
    """--task train still traces a training step of the UNet (an optimizer), on a tiny SDXL pipeline."""
    header = _header(capsys, TINY, "--task", "train")
    assert header.startswith(f"{TINY} task=train target=cpu 64x64 batch=1 checkpointing=none"), header
    assert "optimizer torch.optim.AdamW" in header


def test_simulate_without_a_task_generates_a_pipeline_and_trains_a_model() -> None:
    """``simulate`` defaults as the command line does: the pipeline's generation, a model's training step."""
    assert simulate(TINY, height=64, width=64, num_inference_steps=1, device="cpu").task == "generate"
    assert simulate("gpt2", seq_len=8, device="cpu").task == "train"


def test_fit_on_a_pipeline_says_why_whatever_the_task(capsys: pytest.CaptureFixture[str]) -> None:
    """``vramsim fit`` on a pipeline (generate by default): the search is for a single model, not for a generation."""
    assert main(["fit", TINY, "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "a diffusion pipeline has no --seq-len" in err and err.count("\n") == 1
