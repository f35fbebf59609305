"""The result of ``vramsim validate``: the prediction beside the measured peak of the same workload."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Validation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """Predicted and measured steady-state peak of one workload."""

    model: str
    device: str
    predicted_bytes: int
    measured_bytes: int
    predicted_reserved_bytes: int | None = None
    measured_reserved_bytes: int | None = None

    @property
    def error(self) -> float:
        """Relative error of the prediction (positive: over-predicted)."""
        return self.predicted_bytes / self.measured_bytes - 1 if self.measured_bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error": self.error}
