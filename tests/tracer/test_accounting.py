"""Category accounting on a model small enough to derive every byte by hand."""

from __future__ import annotations

import torch

import vramsim

BATCH, IN, HIDDEN, OUT = 4, 16, 32, 8
FLOAT = 4


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT))


def simulate_mlp(**options: object) -> vramsim.Report:
    return vramsim.simulate(
        mlp,
        inputs=lambda batch, _: {"input": torch.randn(batch, IN)},
        loss=lambda out: out.sum(),
        batch_size=BATCH,
        device="cpu",
        **options,
    )


PARAM_BYTES = (IN * HIDDEN + HIDDEN + HIDDEN * OUT + OUT) * FLOAT


def test_parameters_and_layers_by_hand() -> None:
    """Each Linear's weights and bias, and the one activation autograd keeps: ReLU's output."""
    report = simulate_mlp(optimizer=None)
    assert report.parameters == IN * HIDDEN + HIDDEN + HIDDEN * OUT + OUT
    rows = {row.module: row for row in report.layers}
    assert rows["0"].parameter_bytes == (IN * HIDDEN + HIDDEN) * FLOAT
    # fc1 saves its input (an input) and weight (a parameter): nothing new.
    assert rows["0"].activation_bytes == 0
    # ReLU saves its result, which fc2 also saves as its input: one (BATCH, HIDDEN) buffer.
    assert rows["1"].activation_bytes == BATCH * HIDDEN * FLOAT
    # fc2's output feeds only sum(), whose backward needs no tensor.
    assert rows["2"].activation_bytes == 0


def test_adamw_peak_by_hand() -> None:
    """The peak is AdamW's update of the largest weight, with every gradient still held.

    AdamW keeps exp_avg and exp_avg_sq per parameter plus a float32 step counter each (on the
    CPU). Its for-loop update computes ``exp_avg_sq.sqrt() / bias_correction2_sqrt``: two
    temporaries the size of the weight being updated, live together at the division.
    """
    report = simulate_mlp(optimizer="adamw")
    largest = IN * HIDDEN * FLOAT
    assert report.breakdown == {
        "parameters": PARAM_BYTES,
        "gradients": PARAM_BYTES,
        "optimizer_states": 2 * PARAM_BYTES + 4 * FLOAT,
        "inputs": BATCH * IN * FLOAT,
        "temporaries": 2 * largest,
    }
    assert report.peak_bytes == sum(report.breakdown.values())
    assert (report.peak_at.phase, report.peak_at.op) == ("optimizer", "aten.div")


def test_sgd_momentum_state() -> None:
    """SGD with momentum keeps one buffer per parameter."""
    report = simulate_mlp(optimizer="sgd")
    assert report.breakdown["optimizer_states"] == PARAM_BYTES


def test_forward_only_holds_no_activations() -> None:
    """Under no_grad nothing is saved for backward."""
    report = simulate_mlp(task="forward")
    assert all(row.activation_bytes == 0 for row in report.layers)
    assert "activations" not in report.breakdown
