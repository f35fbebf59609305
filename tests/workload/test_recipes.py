"""Recipes by name (vramsim/config/recipes.py) and the optimizer step fused into backward."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from cli_runs import run

import vramsim
from vramsim.cache.keys import request_key
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.validation.measure import measure_cpu
from vramsim.workload.models import build_model

_TRAIN = {"task": "train", "batch_size": 1, "seq_len": 8}


@pytest.mark.parametrize(
    ("recipe", "expected"),
    [
        ("trainer", ("adamw", None, None, None, "peft")),
        ("trl-sft", ("adamw", None, torch.bfloat16, torch.float32, "none")),
        ("torchtune", ("adamw", "chunked-ce:8", None, torch.bfloat16, "none")),
        ("torchtitan", ("adamw", None, torch.bfloat16, torch.float32, "none")),
        ("accelerate", ("adamw-foreach", None, None, None, "none")),
    ],
)
def test_each_recipe_fills_in_its_librarys_defaults(recipe: str, expected: tuple[object, ...]) -> None:
    config = SimulationConfig(**_TRAIN, recipe=recipe)
    assert (config.optimizer, config.loss, config.mixed_precision, config.dtype, config.kbit_preparation) == expected


def test_options_given_override_the_recipe_and_stay_given_when_the_config_is_copied() -> None:
    """``loss=None`` is the model's own loss, ``mixed_precision=None`` no autocast: not the recipe's."""
    tune = SimulationConfig(**_TRAIN, recipe="torchtune", loss=None, dtype="fp32", kbit_preparation="peft")
    assert (tune.loss, tune.dtype, tune.kbit_preparation) == (None, torch.float32, "peft")
    assert dataclasses.replace(tune, batch_size=2).loss is None
    titan = SimulationConfig(**_TRAIN, recipe="torchtitan", mixed_precision=None)
    assert titan.mixed_precision is None and dataclasses.replace(titan).mixed_precision is None
    assert SimulationConfig(**_TRAIN, recipe="accelerate", optimizer="adamw").optimizer == "adamw"


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"recipe": "deepspeed"}, ConfigError, "unknown recipe 'deepspeed'; choose one of: trainer, trl-sft"),
        ({"recipe": "torchtitan", "lora": 8}, UnsupportedError, "trains whole models, it has no LoRA"),
        ({"recipe": "torchtune", "task": "forward"}, ConfigError, "sets a training run's defaults"),
        ({"kbit_preparation": "trl"}, ConfigError, "choose one of: peft, none"),
        ({"optimizer_in_backward": True, "grad_accum": 2}, ConfigError, "torchtune refuses both"),
        ({"optimizer_in_backward": True, "gpus": 2}, UnsupportedError, "optimizer_in_backward with gpus"),
        ({"optimizer_in_backward": True, "optimizer": None}, ConfigError, "optimizer=none takes none"),
    ],
)
def test_bad_recipe_options_are_refused_in_one_line(options: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SimulationConfig(**{**_TRAIN, **options})


def test_the_recipe_is_part_of_the_cache_key(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    keys = {request_key("simulate", tiny_llama, {**_TRAIN, "recipe": name}) for name in ("trainer", "torchtune")}
    assert len(keys) == 2
    same = request_key("simulate", tiny_llama, {**_TRAIN, "recipe": "trainer", "optimizer": "adamw"})
    assert same in keys


def test_qlora_without_kbit_preparation_keeps_the_unquantized_weights_in_bf16(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """peft's preparation upcasts embeddings, norms and head to float32; torchtune's QLoRA keeps them bf16."""
    qlora = {**_TRAIN, "dtype": "bf16", "quantization": "nf4", "lora": 4, "device": "h100"}
    prepared = vramsim.simulate(tiny_llama, **qlora)
    as_loaded = vramsim.simulate(tiny_llama, **qlora, kbit_preparation="none")
    unquantized = tiny_llama.vocab_size * tiny_llama.hidden_size * 2  # embeddings and head (untied) dominate
    assert prepared.breakdown["parameters"] - as_loaded.breakdown["parameters"] >= unquantized * 2
    assert "weights bfloat16 (given)" in " ".join(f"{k} {v}" for k, v in as_loaded.settings.items())
    assert any(note.name == "kbit_training" and "kbit_preparation=none" in note.detail for note in as_loaded.assumptions)


def test_the_recipe_is_stated_in_the_header_and_its_omissions_in_the_assumptions(capsys, tiny_llama, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.json"
    tiny_llama.to_json_file(path)
    code, out, _ = run(capsys, "trace", str(path), "--seq-len", "8", "--device", "h100", "--recipe", "trl-sft", "--no-cache")
    assert code == 0
    assert "Simulated with: recipe trl-sft, weights float32" in out
    assert "loss_type='chunked_nll' (TRL 1.9) is not traced" in " ".join(out.split())


def _wide_llama(tiny_llama):  # type: ignore[no-untyped-def]
    config = tiny_llama.__class__(**tiny_llama.to_dict())
    config.hidden_size, config.intermediate_size = 256, 1024
    return config


def test_optimizer_in_backward_frees_each_gradient_after_its_step_in_the_real_run(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """Measured on the CPU: the peak drops by most of the gradients, and the prediction is the measurement."""
    model = _wide_llama(tiny_llama)
    fused = SimulationConfig(**_TRAIN, device="cpu")
    in_backward = SimulationConfig(**_TRAIN, device="cpu", optimizer_in_backward=True)
    after, before = measure_cpu(model, in_backward).peak_bytes, measure_cpu(model, fused).peak_bytes
    parameters = sum(p.numel() for p in build_model(model, device="meta", dtype=torch.float32).parameters()) * 4
    assert before - after > parameters / 2
    report = vramsim.simulate(model, **_TRAIN, device="cpu", optimizer_in_backward=True)
    assert report.peak_bytes == after
    assert report.settings["optimizer"] == "torch.optim.AdamW (fused) per parameter, stepped in backward"
