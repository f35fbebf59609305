"""The result of ``vramsim sweep``: every point's figures, each traced or derived, and the largest that fits."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["Answer", "Sweep", "SweepPoint"]

Answer = Literal["traced", "derived", "failed"]
"""How a point was answered: from its own trace; from the sizes of traced points of the same structure
(``vramsim/search/sweep_sizes.py``); or not at all (``SweepPoint.error`` says why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepPoint:
    """One point of the sweep: its sizes and choices, and the figures ``simulate`` gives there."""

    batch_size: int
    seq_len: int
    device: str
    """The target's name."""
    checkpointing: str
    gpus: int
    peak_bytes: int | None
    """``max_memory_allocated()`` over the steady-state step; ``None`` for a failed point."""
    reserved_bytes: int | None
    device_bytes: int | None
    """What nvidia-smi would show."""
    usable_bytes: int | None
    """The device's memory less the headroom; ``None`` for the cpu."""
    fits: bool | None
    """``device_bytes`` within ``usable_bytes``, as ``trace``'s verdict; ``None`` on the cpu or for a failed point."""
    answer: Answer
    error: str | None = None
    """Why a failed point has no figures."""

    @property
    def tokens(self) -> int:
        """Tokens per step on each rank: what "largest" compares."""
        return self.batch_size * self.seq_len


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """Every point of a sweep, in grid order (device, checkpointing, gpus, batch size, sequence length)."""

    model: str
    task: str
    headroom: float
    points: list[SweepPoint]
    largest: list[SweepPoint]
    """Per device, checkpointing and gpus: the fitting point with the most tokens per step (the longer sequence
    on a tie); a combination where nothing fits has none."""
    traces: int
    """Points traced (by the workers); every other point with figures is derived."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim sweep --json`` prints exactly this."""
        return asdict(self)

    def __repr__(self) -> str:
        return f"<Sweep points={len(self.points)} traces={self.traces} model={self.model}>"
