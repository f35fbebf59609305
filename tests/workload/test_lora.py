"""PEFT through peft itself: LoRA and DoRA adapters, peft's own ``all-linear``, ``modules_to_save`` copies."""

from __future__ import annotations

import json

import peft
import pytest
import torch

import vramsim
from vramsim.cli import main
from vramsim.workload.models import build_model


def _peft_counts(model_config, lora: peft.LoraConfig) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(trainable, all) as peft's ``get_nb_trainable_parameters`` counts them, on a model built apart."""
    model = build_model(model_config, device="meta", dtype=torch.float32)
    return peft.get_peft_model(model, lora).get_nb_trainable_parameters()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "lora",
    [
        {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"},
        {"r": 4, "target_modules": "all-linear", "use_dora": True},
        {"r": 2, "target_modules": ["q_proj", "v_proj"], "use_dora": True, "modules_to_save": ["lm_head"]},
    ],
    ids=["lora-all-linear", "dora-all-linear", "dora-modules-to-save"],
)
def test_trainable_parameters_are_peft_s(tiny_llama, lora: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    """``trainable_parameters`` and ``parameters`` equal peft's count: adapters, DoRA's magnitude
    vectors, and the trained copy of a ``modules_to_save`` module beside its frozen original."""
    report = vramsim.simulate(tiny_llama, seq_len=8, device="h100", lora=lora)
    assert (report.trainable_parameters, report.parameters) == _peft_counts(tiny_llama, peft.LoraConfig(**lora))


def test_all_linear_is_peft_s_and_skips_the_head(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    """``all-linear`` goes to peft as the string, which picks GPT-2's Conv1D projections and leaves out
    the output head; the count is peft's."""
    lora = {"r": 4, "target_modules": "all-linear", "fan_in_fan_out": True}  # Conv1D stores (in, out)
    report = vramsim.simulate(tiny_gpt2, seq_len=8, device="h100", lora=lora)
    trainable, _ = _peft_counts(tiny_gpt2, peft.LoraConfig(**lora))
    assert report.trainable_parameters == trainable
    # c_attn (32 -> 96), c_proj (32 -> 32), c_fc (32 -> 128), mlp.c_proj (128 -> 32) per layer: r x (in + out)
    assert trainable == 2 * 4 * ((32 + 96) + (32 + 32) + (32 + 128) + (128 + 32))


def test_modules_to_save_copies_take_gradients_and_states(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """The trained copy of ``lm_head`` (vocab x hidden) gets a gradient and two AdamW states."""
    plain = vramsim.simulate(tiny_llama, seq_len=8, device="h100", lora={"r": 2, "target_modules": ["q_proj"]})
    saved = vramsim.simulate(
        tiny_llama, seq_len=8, device="h100", lora={"r": 2, "target_modules": ["q_proj"], "modules_to_save": ["lm_head"]}
    )
    head = tiny_llama.vocab_size * tiny_llama.hidden_size * 4
    assert saved.parameters - plain.parameters == head // 4
    assert saved.breakdown["optimizer_states"] - plain.breakdown["optimizer_states"] == 2 * head + 512
    assert "copies of lm_head trained" in saved.settings["adapters"]


def test_cli_lora_flags(tiny_llama, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``--lora-alpha``, ``--lora-dropout`` and ``--dora`` reach peft's LoraConfig."""
    tiny_llama.save_pretrained(tmp_path)
    argv = [
        "trace",
        str(tmp_path),
        "--seq-len",
        "8",
        "--device",
        "h100",
        "--lora-rank",
        "4",
        "--lora-alpha",
        "16",
        "--lora-dropout",
        "0.05",
        "--dora",
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["adapters"].startswith("DoRA rank 4, alpha 16, dropout 0.05, on all-linear")
    trainable, _ = _peft_counts(tiny_llama, peft.LoraConfig(r=4, lora_alpha=16, target_modules="all-linear", use_dora=True))
    assert report["trainable_parameters"] == trainable


def test_cli_lora_shape_needs_a_rank(tiny_llama, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    tiny_llama.save_pretrained(tmp_path)
    assert main(["trace", str(tmp_path), "--dora"]) == 2  # a bad argument
    assert "give their rank with --lora-rank R" in capsys.readouterr().err
