"""Advice: one change to a job that does not fit, with what it gives on this run. A record; views word it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vramsim.results.fit import Largest

__all__ = ["Advice"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Advice:
    """One change and its figures, measured on the job as asked."""

    changes: dict[str, Any]
    """The options to change, as ``simulate`` takes them (``{"checkpointing": "full"}``, ``{"zero": 3}``,
    ``{"dtype": "bf16"}``); empty for a size search that found no size that fits."""
    device_bytes: int
    """On the device with the change (a size search that found none: the smallest size's)."""
    saved_bytes: int
    """What the change saves against the job as asked."""
    fits: bool | None
    """Whether the job fits with the change (``None`` on the cpu target)."""
    traced: bool
    """True when another trace measured it (weights' dtype, optimizer, sizes); False for a what-if over the
    job's own traced graph (checkpointing, sharding)."""
    largest: Largest | None = None
    """A size search's result (the largest ``batch_size`` or ``seq_len`` that fits)."""
    held: dict[str, int] | None = None
    """With ``largest``: the other size, held as given (``{"seq_len": 2048}``)."""
