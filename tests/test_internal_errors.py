"""An error in vramsim's own code is vramsim's bug: it is never reported as the model's failure."""

from __future__ import annotations

import pytest
import torch

import vramsim
from vramsim.tracer.data_dependent import policy
from vramsim.workload.tracing import _raised_by_vramsim


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).sum() + torch.zeros((), device=x.device)


def _inputs(batch_size: int, seq_len: int) -> dict[str, torch.Tensor]:
    return {"x": torch.ones(batch_size, 8, device="meta")}


def test_a_bug_in_vramsim_propagates_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TypeError raised by the tracer's own comparison is not turned into a TraceError."""
    monkeypatch.setattr(policy, "FACTORY_LIMIT", "not a number")  # the policy's `numel() <= FACTORY_LIMIT` fails
    with pytest.raises(TypeError, match="'<=' not supported") as caught:
        vramsim.simulate(_Tiny, task="forward", device="cpu", inputs=_inputs, loss=lambda out: out)
    assert not isinstance(caught.value, vramsim.TraceError)
    assert _raised_by_vramsim(caught.value.__traceback__)


def test_a_model_failure_is_still_the_models() -> None:
    """A shape error the model makes inside an op vramsim runs for it is the model's TraceError."""

    class Mismatched(_Tiny):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.proj(x[:, :4]).sum()

    with pytest.raises(vramsim.TraceError, match="Mismatched failed on the meta device at proj"):
        vramsim.simulate(Mismatched, task="forward", device="cpu", inputs=_inputs, loss=lambda out: out)
