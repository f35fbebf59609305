"""The training loop's shape: gradient accumulation, gradient clipping, outputs kept through backward, a custom loss."""

from __future__ import annotations

import pytest

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.tracer.categories import Phase
from vramsim.workload.build import build_program
from vramsim.workload.targets import resolve_target


def _ops(model, device: str, **options):  # type: ignore[no-untyped-def]
    config = SimulationConfig(device=device, seq_len=8, **options)
    _, _, trace = build_and_trace(model, config, resolve_target(device), checkpointing="marked")
    return trace.ops


def test_accumulation_runs_micro_steps_and_steps_once(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """Three forwards and backwards per step, gradients made once and added in place, one optimizer step."""
    ops = [op for op in _ops(tiny_llama, "h100", grad_accum=3) if op.step == 1]
    embeddings = [op for op in ops if op.name == "aten.embedding" and op.phase == Phase.FORWARD]
    assert len(embeddings) == 3
    assert sum(op.name == "aten._fused_adamw_" for op in ops) == 1


def test_clipping_takes_the_foreach_path_on_meta(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """clip_grad_norm_ runs _foreach_norm and _foreach_mul_ on a GPU target as on CUDA (one call each),
    with the CUDA kernel's per-chunk buffer beside the norms."""
    ops = [op for op in _ops(tiny_llama, "h100", max_grad_norm=1.0) if op.step == 1 and op.phase == Phase.OPTIMIZER]
    names = [op.name for op in ops]
    assert names.count("aten._foreach_norm") == 1 and names.count("aten._foreach_mul_") == 1
    assert "aten.linalg_vector_norm" in names  # the total over the stacked norms
    report = vramsim.simulate(tiny_llama, batch_size=1, seq_len=4, device="h100", max_grad_norm=1.0)
    assert report.peak_at.op == "aten._foreach_norm:workspace"


def test_kept_outputs_hold_the_logits_through_backward(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """With the plain loop the float32 logits (batch x seq x vocab) are still live in backward."""
    dropped = vramsim.simulate(tiny_llama, batch_size=2, seq_len=16, device="h100")
    kept = vramsim.simulate(tiny_llama, batch_size=2, seq_len=16, device="h100", keep_outputs=True)
    logits = 2 * 16 * tiny_llama.vocab_size * 4
    assert dropped.peak_at.phase == kept.peak_at.phase == "backward"
    assert kept.breakdown.get("outputs", 0) - dropped.breakdown.get("outputs", 0) == logits
    assert any(a.name == "outputs_kept_through_backward" for a in kept.assumptions)
    assert kept.settings["outputs"] == "kept through backward" and "outputs" not in dropped.settings


def test_a_custom_loss_leaves_labels_out(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """The model computes no loss of its own (no labels), so its float32 upcast of the logits is gone."""

    def loss(outputs):  # type: ignore[no-untyped-def]
        return outputs.logits.mean()

    batch = build_program(tiny_llama, SimulationConfig(seq_len=8, loss=loss), device="meta").batch
    assert "labels" not in batch and "input_ids" in batch
    own = vramsim.simulate(tiny_llama, batch_size=2, seq_len=16, device="h100", dtype="bf16")
    custom = vramsim.simulate(tiny_llama, batch_size=2, seq_len=16, device="h100", dtype="bf16", loss=loss)
    assert custom.peak_bytes < own.peak_bytes
    assert custom.settings["loss"].startswith("custom (no labels")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"task": "forward", "grad_accum": 2}, vramsim.ConfigError, "shape a training step"),
        ({"max_grad_norm": 0}, vramsim.ConfigError, "max_grad_norm must be a number > 0"),
        ({"grad_accum": 0}, vramsim.ConfigError, "grad_accum must be between 1"),
        ({"grad_accum": 2, "gpus": 2, "pp": 2}, vramsim.UnsupportedError, "grad_accum with pp is not modelled yet"),
        (
            {"grad_accum": 2, "gpus": 2, "zero": 2, "offload_states": "optimizer", "device": "h100"},
            vramsim.UnsupportedError,
            "grad_accum with offload_states is not modelled yet",
        ),
    ],
)
def test_loop_options_are_checked(options: dict, error: type, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(error, match=message):
        SimulationConfig(**options)


def test_cli_takes_the_loop_flags(tiny_llama, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``--grad-accum``, ``--max-grad-norm`` and ``--keep-outputs`` reach the program and the header."""
    import json

    from vramsim.cli import main

    tiny_llama.save_pretrained(tmp_path)
    argv = [
        "trace",
        str(tmp_path),
        "--seq-len",
        "8",
        "--device",
        "cpu",
        "--grad-accum",
        "2",
        "--max-grad-norm",
        "1",
        "--keep-outputs",
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    options, settings = report["options"], report["settings"]
    assert (options["grad_accum"], options["max_grad_norm"], options["keep_outputs"]) == (2, 1.0, True)
    assert settings["gradient accumulation"] == "2 micro-steps per optimizer step"
    assert settings["gradient clipping"] == "clip_grad_norm_ to 1 (foreach)"
    assert settings["outputs"] == "kept through backward"


def test_one_step_reports_the_first_steps_peak(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """``steps=1`` (a sweep that asks only whether a program traces): the first step, said so; 0 steps is refused."""
    one, two = (vramsim.simulate(tiny_llama, task="train", seq_len=32, device="cpu", steps=n) for n in (1, 2))
    assert "not a steady state" in next(a.detail for a in one.assumptions if a.name == "steady_state")
    assert one.peak_at.step == 0 and two.peak_at.step == 1
    with pytest.raises(vramsim.ConfigError, match="steps must be at least 1"):
        vramsim.simulate(tiny_llama, task="train", seq_len=32, device="cpu", steps=0)
