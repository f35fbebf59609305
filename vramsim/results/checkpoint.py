"""The result of ``vramsim checkpoint``: plain data, no tensors, nothing printed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vramsim.results.report import Assumption
from vramsim.results.timeline import MemoryTimeline

__all__ = ["CheckpointFile", "CheckpointReport"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointFile:
    """One file of the checkpoint folder."""

    name: str
    bytes: int
    holds: str
    """What it holds: model weights, adapter weights, optimizer state, LR scheduler, RNG state..."""
    tensor_bytes: int = 0
    """The tensor data in it (the rest is the format's header, pickle and zip records)."""
    copies: int = 1
    """Files like it in the folder: every rank writes its own RNG state (``rng_state_{rank}.pth``)."""
    rank: int | None = None
    """The rank that writes it, where each rank writes its own (DCP's ``__{rank}_0.distcp``, DeepSpeed's
    ``zero_pp_rank_{rank}_...``); ``None``: one file for the job."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointReport:
    """What a checkpoint of one training run holds on disk (every rank's files where each writes its own),
    and the memory of saving it and of restoring it on the target (one rank)."""

    model: str
    target: str
    optimizer: str
    """The optimizer whose state is saved, and the kernel it runs (``torch.optim.AdamW (fused)``)."""
    files: list[CheckpointFile]
    disk_bytes: int
    """All files of the checkpoint folder together (each rank's RNG state counted)."""
    save_format: str
    """``trainer`` (the Hugging Face Trainer's folder), ``torch`` (one ``torch.save`` of both state dicts), ``dcp``
    (``torch.distributed.checkpoint``, a file per rank) or ``deepspeed`` (DeepSpeed's ZeRO files)."""
    map_location: str
    """Where ``torch.load`` puts what it loads on restore: ``cpu`` (the Trainer on one GPU; DCP and DeepSpeed
    always) or ``device``."""
    save_peak_bytes: int
    """Allocated on the device while saving: the model and optimizer states (safetensors and torch.save copy to the host)."""
    save_device_bytes: int
    """What the device shows while saving (allocator cache, CUDA context)."""
    save_host_bytes: int
    """Host memory the save holds at once beyond the process: a weights file's tensors, or one optimizer state
    (DCP: the writer's copy-ahead window, or with ``async_save`` the rank's whole state)."""
    restore_peak_bytes: int
    """Allocated on the device at the highest point of the restore."""
    restore_device_bytes: int
    restore_host_bytes: int
    """Host memory the restore holds at once: a weights file, or the loaded optimizer state with map_location=cpu."""
    restore_breakdown: dict[str, int]
    """Allocated bytes by category at the restore's peak."""
    train_device_bytes: int
    """The training step that follows the restore, as ``vramsim trace`` reports it."""
    capacity_bytes: int | None
    """Device memory; ``None`` on the cpu target."""
    headroom: float
    fits: bool | None
    """Whether the restore and the step after it fit within the capacity less headroom; ``None`` on the cpu target."""
    assumptions: list[Assumption] = field(default_factory=list)
    trace_seconds: float = 0.0
    save_timeline: MemoryTimeline | None = None
    """The save's memory over time (``--html`` draws it; not in ``--json``)."""
    restore_timeline: MemoryTimeline | None = None
    """The restore's memory over time, up to the first training step after it (``--html`` draws it; not in ``--json``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim checkpoint --json`` prints exactly this."""
        data = asdict(replace(self, save_timeline=None, restore_timeline=None))
        del data["save_timeline"], data["restore_timeline"]
        return data

    def __repr__(self) -> str:
        return (
            f"<CheckpointReport disk={self.disk_bytes / 2**30:.1f} GiB restore={self.restore_device_bytes / 2**30:.1f} GiB "
            f"target={self.target}>"
        )
