"""The result of ``vramsim fit`` without ``--device``: which catalog GPUs hold the job, judged on one trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vramsim.results.advice import Advice

__all__ = ["DeviceFit", "DeviceVerdict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceVerdict:
    """One catalog GPU judged on the one traced program: its own overheads and usable memory."""

    device: str
    """Catalog name (``vramsim gpus``)."""
    usable_bytes: int
    """Its memory less the headroom."""
    device_bytes: int
    """What nvidia-smi would show on it: the traced program replayed with this device's context, workspaces and
    allocator."""
    fits: bool
    """``trace``'s verdict on this device: ``device_bytes`` within ``usable_bytes``, the figures of the replay within
    the usable memory where the unlimited one passes it and that one runs (the allocator emptying its cache)."""
    kernels_traced: bool
    """True when its kernels are the traced device's (same vendor and compute capability or ISA); else the figure
    rests on the traced device's kernel choices and workspaces."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceFit:
    """Which catalog GPUs hold the job (``vramsim fit`` without ``--device``), smallest first."""

    model: str
    traced_on: str
    """The device the one trace was made for (its kernels)."""
    headroom: float
    devices: list[DeviceVerdict]
    """Every GPU of the catalog the options run on, smallest usable memory first."""
    refused: dict[str, str]
    """Catalog GPUs the options do not run on -> why (an attention kernel, an optimizer it lacks)."""
    advice: list[Advice]
    """When no single GPU holds it: more GPUs (FSDP2 full) and model states offloaded to the host, each a what-if
    of the same trace on ``traced_on``."""
    trace_seconds: float

    @property
    def smallest(self) -> list[DeviceVerdict]:
        """The fitting devices of the three least usable memories that fit."""
        sizes = sorted({d.usable_bytes for d in self.devices if d.fits})[:3]
        return [d for d in self.devices if d.fits and d.usable_bytes in sizes]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim fit --json`` without ``--device`` prints exactly this."""
        return asdict(self)

    def __repr__(self) -> str:
        return f"<DeviceFit smallest={','.join(d.device for d in self.smallest) or 'none'} traced_on={self.traced_on}>"
