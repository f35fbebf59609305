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
