"""ZeRO-Infinity: what DeepSpeed's NVMe offload keeps in pinned host memory instead of the states it moves to NVMe.

As deepspeed 0.19.8 runs it, ZeRO-3 only (``runtime/zero/stage3.py``). On the device nothing changes from
offloading to host memory: the optimizer steps on the CPU either way (``offload_optimizer``), and the
weights' partitions reach the device from pinned host buffers before each gather (``offload_param``).
In host memory (``offload.py`` first counts host offload, then this moves what NVMe holds):

- ``offload_optimizer: nvme`` (``_configure_tensor_swapping``): the trainable partitions form sub-groups
  (``_create_fp16_sub_groups``: in order, each closed once it reaches ``sub_group_size`` elements); each
  sub-group's fp32 master, fp32 gradient and optimizer-state partitions live on NVMe and are swapped in for
  its step through one pinned pool made at start-up, ``buffer_count`` buffers of the largest sub-group's
  elements in fp32, aligned (``runtime/swap_tensor/optimizer_utils.py`` ``OptimizerSwapper.__init__``,
  ``utils.py`` ``SwapBufferManager``). ``pipeline_read``/``pipeline_write`` overlap the swaps through that
  same pool (``pipelined_optimizer_swapper.py``), so they change no memory. A sub-group smaller than
  ``min_aio_bytes`` is not swappable and stays in host memory (``is_swappable_tensor``).
- ``offload_param: nvme``: the pinned flat host buffer holds only the first ``max_in_cpu`` elements of the
  trainable weights' partitions (``_create_param_groups_fp16_flat_cpu_memory``); the rest live on NVMe and
  are read into a pinned pool of ``buffer_count`` x ``buffer_size`` aligned elements in the weights' dtype
  (``runtime/swap_tensor/partitioned_param_swapper.py`` ``_configure_aio``).

Not modelled: ``aio.use_gds`` (GPUDirect Storage pins the parameter pool on the device instead).
"""

from __future__ import annotations

from math import ceil

from ..assumptions import DEEPSPEED_AIO_ALIGNED_BYTES, DEEPSPEED_MIN_SWAPPABLE_BYTES
from .plan import NvmeSwap
from .rank import Rank

__all__ = ["swap_to_nvme"]


def swap_to_nvme(rank: Rank, nvme: NvmeSwap) -> None:
    """Move what ``nvme`` puts on NVMe out of ``rank.host``, add the pinned swap pools there, and say so in a note."""
    trainable = rank.trainable_weights()
    weights = [w for w in rank.weights.values() if w.name in trainable]
    if not weights:
        return
    shares = [ceil(w.numel / rank.ranks_of(w.name)) for w in weights]
    partitions = rank.host.get("parameters", 0) - 4 * sum(shares)  # the weights' partitions, less the fp32 master
    moved = pools = 0
    if nvme.optimizer:
        groups = sub_groups(shares, nvme.sub_group_size)
        swapped = sum(g for g in groups if 4 * g >= max(DEEPSPEED_MIN_SWAPPABLE_BYTES, nvme.block_size))
        states = rank.host.get("optimizer_states", 0) * swapped // sum(shares)  # flat fp32 states per sub-group
        moved += _take(rank, "optimizer_states", states) + _take(rank, "parameters", 4 * swapped)
        moved += _take(rank, "gradients", 4 * swapped)
        pools += nvme.optimizer_buffer_count * aligned(max(groups), 4, nvme) * 4
    if nvme.params:
        element = max(rank.element_size(w.sid) for w in weights)  # as held: bf16 in DeepSpeed's bf16 mode
        moved += _take(rank, "parameters", max(0, partitions - nvme.max_in_cpu * element))
        pools += nvme.param_buffer_count * aligned(nvme.param_buffer_size, element, nvme) * element
    rank.host["swap_buffers"] = rank.host.get("swap_buffers", 0) + pools
    rank.notes.append(
        f"ZeRO-Infinity NVMe offload: {moved:,} B of model states on NVMe, not in host memory; "
        f"pinned swap pools {pools:,} B in host memory (DeepSpeed's swap_tensor buffers)"
    )


def sub_groups(shares: list[int], size: int) -> list[int]:
    """Elements of each of ZeRO-3's optimizer sub-groups (``_create_fp16_sub_groups``)."""
    if size >= sum(shares):
        return [sum(shares)]
    groups, current = [], 0
    for share in shares:
        current += share
        if current >= size:
            groups.append(current)
            current = 0
    return groups + ([current] if current else [])


def aligned(numel: int, element: int, nvme: NvmeSwap) -> int:
    """``numel`` rounded up to whole aio blocks of its dtype (``_io_aligned_numel``)."""
    step = DEEPSPEED_AIO_ALIGNED_BYTES * nvme.intra_op_parallelism // element
    return ceil(numel / step) * step


def _take(rank: Rank, kind: str, nbytes: int) -> int:
    """Remove ``nbytes`` of ``kind`` from host memory (to NVMe); the bytes removed."""
    taken = min(nbytes, rank.host.get(kind, 0))
    rank.host[kind] = rank.host.get(kind, 0) - taken
    return taken
