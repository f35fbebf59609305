"""Data parallelism as a what-if over the traced program: the plan and what one rank holds under it (``shard.py``)."""

from .plan import FSDP_CHOICES, MAX_GPUS, ZERO_STAGES, NvmeSwap, ShardingPlan, ZeroSettings, sharding_plan
from .shard import Sharded, shard

__all__ = [
    "FSDP_CHOICES",
    "MAX_GPUS",
    "ZERO_STAGES",
    "NvmeSwap",
    "Sharded",
    "ShardingPlan",
    "ZeroSettings",
    "shard",
    "sharding_plan",
]
