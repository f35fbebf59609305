"""``validate`` against real CPU runs: the prediction is within 0.5% of the profiler's peak."""

from __future__ import annotations

import pytest

import vramsim
from vramsim.cli import main

CASES = {
    "llama-train-adamw": ("tiny_llama", dict(task="train")),
    "llama-train-bf16-autocast": ("tiny_llama", dict(task="train", mixed_precision="bf16")),
    "llama-train-checkpointing": ("tiny_llama", dict(task="train", gradient_checkpointing=True)),
    "llama-train-adafactor": ("tiny_llama", dict(task="train", optimizer="adafactor")),
    "llama-generate": ("tiny_llama", dict(task="generate", max_new_tokens=4)),
    "gpt2-train-sgd": ("tiny_gpt2", dict(task="train", optimizer="sgd")),
    "bert-forward": ("tiny_bert", dict(task="forward")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_prediction_matches_cpu_run(case: str, request: pytest.FixtureRequest) -> None:
    fixture, options = CASES[case]
    result = vramsim.validate(request.getfixturevalue(fixture), batch_size=2, seq_len=32, **options)
    assert result.measured_bytes > 0
    assert abs(result.error) <= 0.005, result


def test_validate_refuses_gpu_here(tiny_gpt2) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(vramsim.UnsupportedError, match="needs a CUDA GPU"):
        vramsim.validate(tiny_gpt2, device="h100")


def test_validate_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "gpt2", "--task", "forward", "--seq-len", "8", "--json"]) == 0
    assert '"error"' in capsys.readouterr().out
