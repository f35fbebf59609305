"""Category accounting on a model small enough to derive every byte by hand."""

from __future__ import annotations

import torch

import vramsim
from vramsim.config import SimulationConfig
from vramsim.validation.measure import measure_cpu

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
    report = simulate_mlp(optimizer="adamw-foreach")
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


def test_fused_adamw_by_hand() -> None:
    """The default, fused AdamW, keeps the same states and step counters but updates in place:
    its step adds nothing to the held state, so the peak moves back into backward (fc1's bias
    gradient, a sum over the batch), and the real CPU run agrees to the byte."""
    report = simulate_mlp()
    assert report.options["optimizer_implementation"] == "torch.optim.AdamW (fused)"
    assert report.breakdown["optimizer_states"] == 2 * PARAM_BYTES + 4 * FLOAT
    assert (report.peak_at.phase, report.peak_at.op, report.peak_at.module) == ("backward", "aten.sum", "0")
    config = SimulationConfig(
        inputs=lambda batch, _: {"input": torch.randn(batch, IN)}, loss=lambda out: out.sum(), batch_size=BATCH, device="cpu"
    )
    assert measure_cpu(mlp, config).peak_bytes == report.peak_bytes


def test_sgd_momentum_state() -> None:
    """SGD with momentum keeps one buffer per parameter."""
    report = simulate_mlp(optimizer="sgd")
    assert report.breakdown["optimizer_states"] == PARAM_BYTES


def test_forward_only_holds_no_activations() -> None:
    """Under no_grad nothing is saved for backward."""
    report = simulate_mlp(task="forward")
    assert all(row.activation_bytes == 0 for row in report.layers)
    assert "activations" not in report.breakdown


class _DeadBranch(torch.nn.Module):
    """A branch whose result the loss never uses (as LLaVA drops its vision tower's last layer)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = torch.nn.Linear(IN, OUT)
        self.dead = torch.nn.Sequential(torch.nn.Linear(IN, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, OUT))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.dead(input)
        return self.live(input)


def test_a_dead_branch_frees_what_it_saved() -> None:
    """Autograd frees a branch the loss does not reach once its result is dropped; the tracer's
    saved-tensor hook must not keep it (a pack hook returning the tensor it gets leaks it)."""
    options = {"inputs": lambda batch, _: {"input": torch.randn(batch, IN)}, "loss": lambda out: out.sum(), "batch_size": BATCH}
    predicted = vramsim.simulate(_DeadBranch, device="cpu", **options).peak_bytes
    measured = measure_cpu(_DeadBranch, SimulationConfig(device="cpu", **options)).peak_bytes
    assert predicted == measured
