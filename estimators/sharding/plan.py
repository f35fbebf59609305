"""What a data-parallel plan is, and how the libraries size what each rank holds.

``ShardingPlan`` names the choice (DDP, ZeRO stage, FSDP2 mode, ranks); the size rules are the
ones DeepSpeed, FSDP2 and DDP apply to one tensor or one bucket. ``shard.py`` places them on a
timeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil, prod
from typing import Any

from ..assumptions import (
    DDP_BUCKET_CAP_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    DEEPSPEED_MAX_LIVE_PARAMETERS,
    DEEPSPEED_NVME_DEFAULTS,
    DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD,
    DEEPSPEED_PREFETCH_BUCKET_ELEMENTS,
    DEEPSPEED_REDUCE_BUCKET_ELEMENTS,
    HSDP_SHARD_GROUP_DEFAULT,
)

__all__ = [
    "FSDP_CHOICES", "MAX_GPUS", "OFFLOAD_CHOICES", "ZERO_STAGES", "NvmeSwap", "ShardingPlan", "ZeroSettings", "ddp_bucket_sizes",
    "itemsize", "shard_bytes", "sharding_plan",
]  # fmt: skip

ZERO_STAGES = (0, 1, 2, 3)
FSDP_CHOICES = ("no", "full", "grad-op", "hybrid")
OFFLOAD_CHOICES = ("none", "optimizer", "params")
"""Model states kept in host memory: ``optimizer`` (DeepSpeed ``offload_optimizer``: fp32 master
partition, fp32 gradient partition, optimizer states; the step runs on the CPU) or ``params``
(that and the weights' shards: DeepSpeed ZeRO-3 ``offload_param``, FSDP2 ``CPUOffloadPolicy``)."""
MAX_GPUS = 1 << 16
"""More data-parallel ranks than 65,536 are refused: no job runs that many today."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroSettings:
    """DeepSpeed's ``zero_optimization`` sizes, in elements; DeepSpeed's defaults unless a ds_config sets them."""

    reduce_bucket: int = DEEPSPEED_REDUCE_BUCKET_ELEMENTS
    prefetch_bucket: int = DEEPSPEED_PREFETCH_BUCKET_ELEMENTS
    max_live_parameters: int = DEEPSPEED_MAX_LIVE_PARAMETERS
    param_persistence_threshold: int = DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD
    nvme: NvmeSwap | None = None
    """ZeRO-Infinity: what a ds_config offloads to NVMe, and its swap settings; None offloads to host memory only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmeSwap:
    """ZeRO-3's NVMe offload (ds_config ``offload_optimizer``/``offload_param`` ``device: nvme``), in elements."""

    optimizer: bool = False
    """The fp32 master, gradient and optimizer-state partitions live on NVMe (``swap_optimizer``)."""
    params: bool = False
    """The weights' partitions beyond ``max_in_cpu`` live on NVMe (``params_in_nvme_and_cpu``)."""
    optimizer_buffer_count: int = DEEPSPEED_NVME_DEFAULTS["optimizer_buffer_count"]
    param_buffer_count: int = DEEPSPEED_NVME_DEFAULTS["param_buffer_count"]
    param_buffer_size: int = DEEPSPEED_NVME_DEFAULTS["param_buffer_size"]
    max_in_cpu: int = DEEPSPEED_NVME_DEFAULTS["max_in_cpu"]
    sub_group_size: int = DEEPSPEED_NVME_DEFAULTS["sub_group_size"]
    intra_op_parallelism: int = DEEPSPEED_NVME_DEFAULTS["intra_op_parallelism"]
    block_size: int = DEEPSPEED_NVME_DEFAULTS["block_size"]
    """``aio.block_size``, in bytes."""


@dataclass(frozen=True, slots=True)
class ShardingPlan:
    """How the training step is spread over ``gpus`` data-parallel ranks."""

    gpus: int = 1
    zero: int = 0
    """DeepSpeed ZeRO stage, 0 (none) to 3."""
    fsdp: str = "no"
    """``no``, ``full`` (FSDP2 reshard_after_forward=True), ``grad-op`` (False) or ``hybrid`` (HSDP: full
    within a shard group, replicated across the groups)."""
    bucket_view: bool = False
    """DDP's ``gradient_as_bucket_view=True``: each ``.grad`` is a view into its bucket, so the buckets
    are the gradients, kept for the run; the gradient autograd makes (``.grad`` was set to None) is
    copied in and dropped at once."""
    offload: str = "none"
    """One of ``OFFLOAD_CHOICES``: the model states kept in host memory."""
    shard_group: int = 0
    """HSDP: the ranks the model states are sharded over (a node); 0 for the other schemes."""
    zero_settings: ZeroSettings = field(default_factory=ZeroSettings)
    pipelined: bool = False
    """Data parallelism over pipeline stages: gradients accumulate over the micro-batches and are reduced after
    the last one's backward (torch.distributed.pipelining ``perform_reduce_grad``, DeepSpeed's PipelineEngine
    ``_exec_reduce_grads``), so FSDP2 keeps the stage's weights gathered and its gradients whole until then."""
    expert_parallel: int = 1
    """Expert-parallel ranks among the data-parallel ones (torchtitan borrows ep from dp_shard, DeepSpeed-MoE from
    the data-parallel world): a rank holds num_experts / ep experts, whose states are replicated or sharded over
    the ``expert_shard_size`` ranks holding the same experts; the other weights over ``shard_size``."""

    @property
    def scheme(self) -> str:
        """The name the report prints."""
        offload = f" + offload {self.offload}" if self.offload != "none" else ""
        if self.fsdp == "hybrid":
            return f"FSDP2 hybrid ({self.replicas} x {self.shard_size}){offload}"
        if self.fsdp != "no":
            return f"FSDP2 {self.fsdp}{offload}"
        if self.zero:
            return f"ZeRO-{self.zero}{offload}"
        return "DDP" if self.gpus > 1 else "one GPU"

    @property
    def shard_size(self) -> int:
        """The ranks each model state is divided over: the shard group for HSDP, every rank otherwise."""
        return self.shard_group or self.gpus

    @property
    def expert_shard_size(self) -> int:
        """The ranks an expert's states are divided over: torchtitan's ``dp_shard_mod_ep`` mesh, DeepSpeed's
        expert-data-parallel group."""
        return self.shard_size // self.expert_parallel

    @property
    def replicas(self) -> int:
        """Copies of each shard: HSDP all-reduces the gradients' shards across them."""
        return self.gpus // self.shard_size

    @property
    def reshards_after_forward(self) -> bool:
        return self.fsdp in ("full", "hybrid")

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


def sharding_plan(
    gpus: object = 1,
    zero: object = 0,
    fsdp: object = "no",
    bucket_view: bool = False,
    *,
    offload: object = "none",
    shard_group: object = None,
    zero_settings: ZeroSettings | None = None,
    pipelined: bool = False,
    expert_parallel: int = 1,
) -> ShardingPlan:
    """The plan for these options; ``ValueError`` naming the choices otherwise."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise ValueError(f"gpus must be an integer between 1 and {MAX_GPUS}, got {gpus!r}")
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise ValueError(f"unknown ZeRO stage {zero!r}; choose one of: {', '.join(map(str, ZERO_STAGES))}")
    text = str(fsdp).strip().lower()
    if text not in FSDP_CHOICES:
        raise ValueError(f"unknown fsdp {fsdp!r}; choose one of: {', '.join(FSDP_CHOICES)}")
    if zero and text != "no":
        raise ValueError(f"ZeRO-{zero} and FSDP {text} both shard the model; choose one: zero=0 or fsdp='no'")
    if bucket_view and (zero or text != "no"):
        raise ValueError("gradient_as_bucket_view is DDP's; it applies with zero=0 and fsdp='no'")
    group = _shard_group(gpus, text, shard_group)
    if (group or gpus) % expert_parallel:
        within = f"HSDP's shard group ({group} ranks)" if group else f"the {gpus} data-parallel ranks"
        raise ValueError(f"ep={expert_parallel} expert-parallel ranks are data-parallel ranks: it must divide {within}")
    return ShardingPlan(
        gpus=gpus,
        zero=int(zero),
        fsdp=text,
        bucket_view=bool(bucket_view),  # type: ignore[call-overload]
        offload=_offload(int(zero), text, offload),
        shard_group=group,
        zero_settings=zero_settings or ZeroSettings(),
        pipelined=pipelined,
        expert_parallel=expert_parallel,
    )


def _offload(zero: int, fsdp: str, offload: object) -> str:
    """What DeepSpeed and FSDP2 can keep on the host: ZeRO offloads the optimizer (any stage) and the weights
    (stage 3 only); FSDP2's ``CPUOffloadPolicy`` moves weights, gradients and optimizer states together."""
    text = str(offload).strip().lower()
    if text not in OFFLOAD_CHOICES:
        raise ValueError(f"unknown offload_states {offload!r}; choose one of: {', '.join(OFFLOAD_CHOICES)}")
    if text != "none" and not zero and fsdp == "no":
        raise ValueError("offload_states moves sharded model states to the host: it needs zero 1-3 or fsdp")
    if text == "params" and zero in (1, 2):
        raise ValueError(
            f"DeepSpeed offloads parameters with ZeRO-3 only (offload_param); ZeRO-{zero} takes offload_states='optimizer'"
        )
    if text == "optimizer" and fsdp != "no":
        raise ValueError(
            "FSDP2's CPUOffloadPolicy moves the sharded weights, gradients and optimizer states together: "
            "use offload_states='params'"
        )
    return text


def _shard_group(gpus: int, fsdp: str, shard_group: object) -> int:
    """HSDP's shard group: ``shard_group`` ranks (default a node's GPUs, or every rank when there are fewer)."""
    if shard_group is None:
        return min(HSDP_SHARD_GROUP_DEFAULT, gpus) if fsdp == "hybrid" else 0
    if fsdp != "hybrid":
        raise ValueError("shard_group_size is HSDP's (fsdp='hybrid'): the other schemes shard over every rank")
    if isinstance(shard_group, bool) or not isinstance(shard_group, int) or not 1 <= shard_group <= gpus:
        raise ValueError(
            f"shard_group_size must be an integer between 1 and the data-parallel ranks ({gpus}), got {shard_group!r}"
        )
    if gpus % shard_group:
        raise ValueError(
            f"HSDP replicates shard groups of {shard_group} ranks: {gpus} data-parallel ranks are not a multiple of it"
        )
    return shard_group


def itemsize(attrs: dict[str, Any]) -> int:
    numel = prod(attrs["shape"])
    return attrs["nbytes"] // numel if numel and attrs["nbytes"] % numel == 0 else 1


def shard_bytes(nbytes: int, shape: tuple[int, ...], n: int, *, dim: int | None) -> int:
    """One rank's bytes of a tensor: ceil(numel / n) elements (``dim`` None: DeepSpeed pads each weight to a
    multiple of n, partition_parameters.py ``_padding_size``), or ceil(shape[dim] / n) slices (FSDP2's Shard(dim))."""
    numel = prod(shape)
    if not numel or nbytes % numel:
        return ceil(nbytes / n)
    itemsize = nbytes // numel
    if dim is not None and len(shape) > dim:
        return ceil(shape[dim] / n) * (numel // shape[dim]) * itemsize
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
