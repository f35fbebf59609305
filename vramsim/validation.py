"""``validate``: the prediction beside a real run of the same workload."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .api import simulate
from .config import SimulationConfig
from .errors import UnsupportedError
from .measure import measure_cpu
from .models import ModelSource

__all__ = ["Validation", "validate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """Predicted and measured steady-state peak of one workload."""

    model: str
    device: str
    predicted_bytes: int
    measured_bytes: int

    @property
    def error(self) -> float:
        """Relative error of the prediction (positive: over-predicted)."""
        return self.predicted_bytes / self.measured_bytes - 1 if self.measured_bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error": self.error}


def validate(model: ModelSource, *, device: str = "cpu", **options: Any) -> Validation:
    """Simulate ``model`` for ``device`` and run it there for real; CPU only on this build.

    >>> import transformers
    >>> cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)
    >>> abs(validate(cfg, task="forward", seq_len=16).error) < 0.005
    True
    """
    if device.lower() != "cpu":
        raise UnsupportedError(
            f"validate runs the workload for real, and only the cpu device is measured here (got {device!r})"
        )
    report = simulate(model, device="cpu", **options)
    measured = measure_cpu(model, SimulationConfig(device="cpu", **options))
    return Validation(model=report.model, device="cpu", predicted_bytes=report.peak_bytes, measured_bytes=measured.peak_bytes)
