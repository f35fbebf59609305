"""Custom code: a builder in the user's own file, and ops without a meta kernel."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vramsim
from vramsim.cli import main

MODEL_FILE = """
import torch

def build():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
"""


def feed(batch: int, _: int) -> dict[str, torch.Tensor]:
    return {"input": torch.randn(batch, 8)}


def test_builder_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL_FILE)
    report = vramsim.simulate(f"{tmp_path}/model.py:build", inputs=feed, loss=lambda out: out.sum(), device="cpu")
    assert report.parameters == 8 * 16 + 16 + 16 * 4 + 4


@pytest.mark.parametrize(
    ("spec", "message"),
    [("model.py:missing", "has no callable 'missing'"), ("nowhere.py:build", "does not exist")],
)
def test_bad_builder_is_one_line(tmp_path: Path, spec: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model.py").write_text(MODEL_FILE)
    assert main(["trace", f"{tmp_path}/{spec}", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_op_without_meta_kernel_names_itself() -> None:
    library = torch.library.Library("vramsim_test", "DEF")
    library.define("cpu_only(Tensor x) -> Tensor")
    library.impl("cpu_only", lambda x: x.clone(), "CPU")

    class UsesCpuOnlyOp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, input: torch.Tensor) -> torch.Tensor:
            return torch.ops.vramsim_test.cpu_only(self.proj(input))

    with pytest.raises(vramsim.TraceError, match=r"calls vramsim_test::cpu_only at .*register_fake"):
        vramsim.simulate(UsesCpuOnlyOp, inputs=feed, loss=lambda out: out.sum(), device="cpu")


class ReturnsItsLoss(torch.nn.Module):
    """A training module in nanoGPT's manner: ``forward`` takes the targets and returns the loss
    itself, as a 0-dim tensor or in a dict."""

    def __init__(self, as_dict: bool = False) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.head = torch.nn.Linear(16, 64, bias=False)
        self.as_dict = as_dict

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
        logits = self.head(self.embed(idx))  # (B, T, vocab)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return {"loss": loss, "logits": logits} if self.as_dict else loss


def tokens(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"idx": torch.randint(0, 64, (batch, seq)), "targets": torch.randint(0, 64, (batch, seq))}


@pytest.mark.parametrize("as_dict", [False, True], ids=["0-dim", "dict"])
def test_a_returned_loss_is_trained_on(as_dict: bool) -> None:
    """No ``loss=``: the loss the forward returns is the one backward runs from, and the prediction is
    the real CPU run's peak."""
    validation = vramsim.validate(lambda: ReturnsItsLoss(as_dict), inputs=tokens, batch_size=2, seq_len=32)
    assert validation.measured_bytes > 0
    assert validation.predicted_bytes == validation.measured_bytes, validation


def test_a_returned_tensor_that_is_no_loss_is_refused() -> None:
    """A forward returning logits (not 0-dim) is no loss: one line saying what to pass."""
    with pytest.raises(vramsim.UnsupportedError, match=r"returned no loss to train on \(a 0-dim tensor"):
        vramsim.simulate(UsesNoLoss, inputs=feed, device="cpu")


class UsesNoLoss(torch.nn.Sequential):
    def __init__(self) -> None:
        super().__init__(torch.nn.Linear(8, 4))


def _self_checkpointing_llama() -> torch.nn.Module:
    """A user's own 4-layer Llama that turns on transformers' checkpointing itself (no ``context_fn``)."""
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=256,
    )
    model = transformers.LlamaForCausalLM(config)
    model.gradient_checkpointing_enable()
    return model


def test_a_model_checkpointing_itself_recomputes_with_the_targets_kernels() -> None:
    """The recompute re-enters the target's kernel emulation: the CPU's flash attention, as in the forward
    (before, the recompute took the math path and checkpoint refused its different saved tensors at
    ``model.layers.3.mlp.down_proj``); the peak is the real CPU run's."""
    from vramsim.config import SimulationConfig
    from vramsim.validation.measure import measure_cpu

    options = {"task": "train", "batch_size": 2, "seq_len": 64}
    report = vramsim.simulate(_self_checkpointing_llama, device="cpu", **options)
    measured = measure_cpu(_self_checkpointing_llama, SimulationConfig(device="cpu", **options)).peak_bytes
    assert report.peak_bytes / measured == pytest.approx(1.0, abs=0.005)
