"""A diffusion pipeline's training step (vramsim/workload/diffusion/training.py) on the tiny FLUX and SDXL folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vramsim import Report, simulate
from vramsim.cli import main
from vramsim.errors import ConfigError, UnsupportedError

TINY_SDXL = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-sdxl")
TINY_FLUX = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-flux")
_FLUX = {"task": "train", "device": "cpu", "height": 64, "width": 64, "max_sequence_length": 32}


@pytest.fixture(scope="module")
def flux_lora() -> Report:
    return simulate(TINY_FLUX, lora=4, **_FLUX)


def test_lora_trains_only_the_adapters_peft_counts(flux_lora: Report) -> None:
    import peft
    from diffusers import FluxTransformer2DModel

    transformer = FluxTransformer2DModel.from_config(FluxTransformer2DModel.load_config(f"{TINY_FLUX}/transformer"))
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["to_k", "to_q", "to_v", "to_out.0"])
    trainable, _ = peft.get_peft_model(transformer, config).get_nb_trainable_parameters()
    assert flux_lora.trainable_parameters == trainable
    names = {note.name for note in flux_lora.assumptions}
    assert {"pipeline_training", "lora_targets"} <= names


def test_a_full_fine_tune_trains_the_whole_denoiser_and_holds_its_adam_states() -> None:
    from diffusers import UNet2DConditionModel

    report = simulate(TINY_SDXL, task="train", device="cpu", height=32, width=32)
    unet = UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(f"{TINY_SDXL}/unet"))
    count = sum(p.numel() for p in unet.parameters())
    assert report.trainable_parameters == count < report.parameters
    assert report.breakdown["optimizer_states"] >= 2 * 4 * count  # AdamW's two fp32 moments per trained weight
    assert {c.name: c.phase for c in report.components}["unet"] == "train"


def test_cached_outputs_take_the_encoders_and_the_vae_off_the_device(flux_lora: Report) -> None:
    cached = simulate(TINY_FLUX, lora=4, cache_latents=True, cache_text_embeddings=True, **_FLUX)
    assert {c.name for c in flux_lora.components} == {"text_encoder", "text_encoder_2", "transformer", "vae"}
    assert [c.name for c in cached.components] == ["transformer"]
    frozen = sum(c.weights_bytes for c in flux_lora.components if c.name != "transformer")
    assert flux_lora.breakdown["parameters"] - cached.breakdown["parameters"] == frozen
    assert cached.options["cache_latents"] and cached.options["cache_text_embeddings"]


def test_the_cli_takes_the_cache_switches(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "trace",
                TINY_FLUX,
                "--task",
                "train",
                "--device",
                "cpu",
                "--height",
                "64",
                "--width",
                "64",
                "--lora-rank",
                "4",
                "--cache-latents",
                "--cache-text-embeddings",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in data["components"]] == ["transformer"]


def test_a_pipeline_without_a_training_recipe_is_a_one_line_error(tmp_path: Path) -> None:
    shutil.copytree(TINY_SDXL, tmp_path / "pipe")
    index = json.loads((tmp_path / "pipe" / "model_index.json").read_text())
    (tmp_path / "pipe" / "model_index.json").write_text(json.dumps(index | {"_class_name": "KandinskyPipeline"}))
    with pytest.raises(UnsupportedError, match="KandinskyPipeline is not trained yet; pipelines trained: "):
        simulate(str(tmp_path / "pipe"), task="train", device="cpu")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"task": "generate", "cache_latents": True}, ConfigError, "shape a pipeline's training step"),
        ({"task": "generate", "ema": True}, ConfigError, "trains nothing"),
        ({"task": "train", "ema": True, "lora": 4}, ConfigError, "the LoRA scripts keep no EMA"),
        ({"task": "train", "dtype": "bf16"}, ConfigError, "drop --dtype"),
        ({"task": "train", "grad_accum": 2}, UnsupportedError, "grad_accum is not modelled yet"),
    ],
)
def test_bad_training_options_are_one_line_errors(options: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        simulate(TINY_SDXL, device="cpu", **options)


def test_a_stable_diffusion_pipeline_trains_its_unet_as_measured_on_the_cpu(tmp_path: Path) -> None:
    """The SD 1.5 path (one CLIP encoder's last hidden state, a UNet without SDXL's added embeddings), on the tiny
    SDXL folder cut down to a StableDiffusionPipeline, against the same step run for real."""
    from vramsim.config import SimulationConfig
    from vramsim.validation.measure import measure_cpu

    folder = tmp_path / "tiny-sd"
    shutil.copytree(TINY_SDXL, folder, ignore=shutil.ignore_patterns("text_encoder_2", "tokenizer_2"))
    index = json.loads((folder / "model_index.json").read_text())
    dropped = ("text_encoder_2", "tokenizer_2", "force_zeros_for_empty_prompt")
    index = {k: v for k, v in index.items() if k not in dropped} | {"_class_name": "StableDiffusionPipeline"}
    (folder / "model_index.json").write_text(json.dumps(index))
    unet = json.loads((folder / "unet" / "config.json").read_text())
    for key in ("addition_embed_type", "addition_time_embed_dim", "projection_class_embeddings_input_dim"):
        unet.pop(key)
    (folder / "unet" / "config.json").write_text(json.dumps(unet | {"cross_attention_dim": 32}))
    options = {"task": "train", "height": 16, "width": 16}
    predicted = simulate(str(folder), device="cpu", **options)
    measured = measure_cpu(str(folder), SimulationConfig(device="cpu", **options)).peak_bytes
    assert abs(predicted.peak_bytes / measured - 1) <= 0.005
    assert [c.name for c in predicted.components] == ["text_encoder", "unet", "vae"]


TINY_SD3 = str(Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-sd3")
_SD3 = {"task": "train", "device": "cpu", "height": 64, "width": 64, "cache_latents": True}


def test_sd3_lora_adapts_the_scripts_joint_attention_projections() -> None:
    """train_dreambooth_lora_sd3.py's default targets (both streams' attention projections), as peft counts them; the three
    text encoders encode the prompt each step, T5 over the script's 77 tokens unless max_sequence_length is given."""
    import peft
    from diffusers import SD3Transformer2DModel

    from vramsim.estimators.assumptions import SD3_SCRIPT_LORA_TARGETS

    report = simulate(TINY_SD3, lora=4, **_SD3)
    transformer = SD3Transformer2DModel.from_config(SD3Transformer2DModel.load_config(f"{TINY_SD3}/transformer"))
    config = peft.LoraConfig(r=4, lora_alpha=4, target_modules=list(SD3_SCRIPT_LORA_TARGETS))
    trainable, _ = peft.get_peft_model(transformer, config).get_nb_trainable_parameters()
    assert report.trainable_parameters == trainable
    assert [c.name for c in report.components] == ["text_encoder", "text_encoder_2", "text_encoder_3", "transformer"]
    longer = simulate(TINY_SD3, lora=4, max_sequence_length=256, **_SD3)
    t5 = [next(c.peak_bytes for c in r.components if c.name == "text_encoder_3") for r in (report, longer)]
    assert t5[0] < t5[1]
    with pytest.raises(ConfigError, match="has no T5 text encoder"):
        simulate(TINY_SDXL, task="train", device="cpu", max_sequence_length=77)


def test_sd3_cached_embeddings_take_the_three_encoders_off_the_device() -> None:
    cached = simulate(TINY_SD3, lora=4, cache_text_embeddings=True, **_SD3)
    assert [c.name for c in cached.components] == ["transformer"]


def test_ema_keeps_an_fp32_copy_of_the_trained_denoiser_as_measured_on_the_cpu() -> None:
    """``--use_ema``: diffusers' EMAModel clones every trained weight (fp32) and updates it after the optimizer step; the
    copy is counted with the optimizer states, and the whole step matches the real CPU run (the tiny SD3 MMDiT-X)."""
    from vramsim.config import SimulationConfig
    from vramsim.validation.measure import measure_cpu

    ema = simulate(TINY_SD3, ema=True, **_SD3)
    assert ema.breakdown["optimizer_states"] >= 3 * 4 * ema.trainable_parameters  # AdamW's two moments and the copy
    assert "ema" in {a.name for a in ema.assumptions} and ema.options["ema"]
    measured = measure_cpu(TINY_SD3, SimulationConfig(ema=True, **_SD3)).peak_bytes
    assert abs(ema.peak_bytes / measured - 1) <= 0.005
    with pytest.raises(ConfigError, match="ema is an option of diffusion pipelines"):
        simulate("gpt2", task="train", device="cpu", ema=True)
