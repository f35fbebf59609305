"""What a data-parallel plan is, and how the libraries size what each rank holds.

``ShardingPlan`` names the choice (DDP, ZeRO stage, FSDP2 mode, ranks); the size rules are the
ones DeepSpeed, FSDP2 and DDP apply to one tensor or one bucket. ``sharding.py`` places them on a
timeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod
from typing import Any

from .assumptions import DDP_BUCKET_CAP_BYTES, DDP_FIRST_BUCKET_BYTES

__all__ = [
    "FSDP_CHOICES", "MAX_GPUS", "ZERO_STAGES", "ShardingPlan", "ddp_bucket_sizes", "itemsize", "shard_bytes", "sharding_plan",
]  # fmt: skip

ZERO_STAGES = (0, 1, 2, 3)
FSDP_CHOICES = ("no", "full", "grad-op")
MAX_GPUS = 1 << 16
"""More data-parallel ranks than 65,536 are refused: no job runs that many today."""


@dataclass(frozen=True, slots=True)
class ShardingPlan:
    """How the training step is spread over ``gpus`` data-parallel ranks."""

    gpus: int = 1
    zero: int = 0
    """DeepSpeed ZeRO stage, 0 (none) to 3."""
    fsdp: str = "no"
    """``no``, ``full`` (FSDP2 reshard_after_forward=True) or ``grad-op`` (False)."""
    bucket_view: bool = False
    """DDP's ``gradient_as_bucket_view=True``: each ``.grad`` is a view into its bucket, so the buckets
    are the gradients, kept for the run; the gradient autograd makes (``.grad`` was set to None) is
    copied in and dropped at once."""

    @property
    def scheme(self) -> str:
        """The name the report prints."""
        if self.fsdp != "no":
            return f"FSDP2 {self.fsdp}"
        if self.zero:
            return f"ZeRO-{self.zero}"
        return "DDP" if self.gpus > 1 else "one GPU"

    @property
    def shards_optimizer(self) -> bool:
        return self.zero >= 1 or self.fsdp != "no"

    @property
    def shards_gradients(self) -> bool:
        return self.zero >= 2 or self.fsdp != "no"

    @property
    def shards_parameters(self) -> bool:
        return self.zero == 3 or self.fsdp != "no"

    @property
    def active(self) -> bool:
        return self.gpus > 1 or self.zero > 0 or self.fsdp != "no"


def sharding_plan(gpus: object = 1, zero: object = 0, fsdp: object = "no", bucket_view: bool = False) -> ShardingPlan:
    """The plan for these options; ``ValueError`` naming the choices otherwise."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise ValueError(f"gpus must be an integer between 1 and {MAX_GPUS}, got {gpus!r}")
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise ValueError(f"unknown ZeRO stage {zero!r}; choose one of: {', '.join(map(str, ZERO_STAGES))}")
    text = str(fsdp).strip().lower()
    if text not in FSDP_CHOICES:
        raise ValueError(f"unknown fsdp {fsdp!r}; choose one of: {', '.join(FSDP_CHOICES)}")
    if zero and text != "no":
        raise ValueError(f"ZeRO-{zero} and FSDP {text} both shard the model; choose one (--zero 0 or --fsdp no)")
    if bucket_view and (zero or text != "no"):
        raise ValueError("gradient_as_bucket_view is DDP's; it applies with --zero 0 and --fsdp no")
    return ShardingPlan(gpus=gpus, zero=int(zero), fsdp=text, bucket_view=bool(bucket_view))  # type: ignore[call-overload]


def itemsize(attrs: dict[str, Any]) -> int:
    numel = prod(attrs["shape"])
    return attrs["nbytes"] // numel if numel and attrs["nbytes"] % numel == 0 else 1


def shard_bytes(nbytes: int, shape: tuple[int, ...], n: int, *, dim0: bool) -> int:
    """One rank's bytes of a tensor: ceil(numel / n) elements (DeepSpeed pads each weight to a
    multiple of n, partition_parameters.py ``_padding_size``), or ceil(dim0 / n) rows (FSDP2)."""
    numel = prod(shape)
    if not numel or nbytes % numel:
        return ceil(nbytes / n)
    itemsize = nbytes // numel
    if dim0 and shape:
        return ceil(shape[0] / n) * (numel // shape[0]) * itemsize
    return ceil(numel / n) * itemsize


def ddp_bucket_sizes(sizes: list[int]) -> list[int]:
    """DDP's bucket assignment (``_compute_bucket_assignment_by_size``): fill a bucket until it
    reaches its cap (the first 1 MiB, then 25 MiB), then start the next."""
    buckets: list[int] = []
    current = 0
    for nbytes in sizes:
        current += nbytes
        if current >= (DDP_FIRST_BUCKET_BYTES if not buckets else DDP_BUCKET_CAP_BYTES):
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    return buckets
