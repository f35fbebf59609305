"""CPU offload of model states: what leaves one rank's device for host memory, and what it adds there.

DeepSpeed ZeRO-Offload, as ``deepspeed/runtime/zero/stage_1_and_2.py`` and ``stage3.py`` (v0.18)
run it with ``offload_optimizer`` (``device: cpu``): the optimizer's device is the CPU, so the fp32
master partition (``single_partition_of_fp32_groups``, ``fp32_partitioned_groups_flat``, cloned to
the host even when the weights are fp32), the fp32 gradient partition (its ``.grad``, stage 3's
``grad_partitions_flat_buffer``) and the optimizer states live on the host and the step runs there
(DeepSpeedCPUAdam). Stage 1 still accumulates whole gradients on the device and reduces them at the
end of backward; stage 2 copies each reduced partition to the host (``copy_grads_in_partition``);
stages 1-2 keep a device buffer of the largest weight's size for the hand-over
(``temp_grad_buffer_for_gpu_offload``, made at start-up) and two host buffers
(``temp_grad_buffer_for_cpu_offload``, ``param_buffer_of_bit16_for_cpu_offload_groups``).
``offload_param`` (stage 3 only) keeps the weights' partitions in one pinned host buffer
(``_create_param_groups_fp16_flat_cpu_memory``) and gathers them to the device around each use.

FSDP2's ``CPUOffloadPolicy``, as torch 2.13's ``_fully_shard/_fsdp_param.py`` runs it: the padded
shard is moved to the CPU at init (``padded_sharded_param.cpu()``), so the optimizer, built on the
sharded parameters, keeps its states there and steps there; before each all-gather the shard is
copied back (``sharded_param_data.to(self.device)``) into a copy-in that lives until the flat
all-gather input is filled; after the reduce-scatter the gradient's shard is copied to the host
(``_fsdp_collectives.py`` ``foreach_reduce``: ``.to(torch.device("cpu"))``) and the device copy dropped.

ZeRO-Infinity's NVMe offload then moves what it keeps on NVMe out of the host figures (``nvme.py``).

Not counted: the host side's own temporaries (the CPU optimizer step), the pinned-memory rounding
of the host buffers, and the small device copies ZeRO-3 makes of a partition before gathering or
accumulating it.
"""

from __future__ import annotations

from math import ceil

from .plan import itemsize
from .rank import COMMUNICATION, Rank, Weight

__all__ = ["offload_to_host"]


def offload_to_host(rank: Rank) -> None:
    """Move ``rank``'s offloaded model states off its device, into ``rank.host``."""
    plan = rank.plan
    trainable = rank.trainable_weights()
    last_step = len(rank.graph.graph["step_clocks"]) - 1
    for sid, block in enumerate(rank.blocks):
        if block.category == "optimizer_states":
            _to_host(rank, block.nbytes, "optimizer_states")
            block.nbytes = 0
        elif block.category == "temporaries" and block.phase == "optimizer":
            block.nbytes = 0  # the step runs on the CPU
        elif (
            plan.offload == "params"
            and sid < rank.traced
            and block.category == "parameters"
            and (rank.sharded_weight(rank.weights[rank.attrs[sid]["owner"]]))
        ):
            _to_host(rank, block.nbytes, "parameters")
            block.nbytes = 0
        elif block.op == "zero3.grad_partitions" or (plan.zero == 2 and block.op == "reduce_scatter"):
            block.nbytes = 0  # reduced into the host's fp32 gradient partition instead (counted below)
        elif plan.fsdp != "no" and block.op == "reduce_scatter":
            if block.step == last_step:  # one step's gradients, as on the device
                _to_host(rank, block.nbytes, "gradients")
            block.free_at = rank.at(block.alloc_at[0], 5)  # copied to the host, then dropped
            block.category = "temporaries"
    if plan.zero:
        _zero_host_buffers(rank, [w for w in rank.weights.values() if w.name in trainable])


def _zero_host_buffers(rank: Rank, weights: list[Weight]) -> None:
    """DeepSpeed's fp32 gradient partition on the host; stages 1-2's hand-over buffers."""
    if not weights:
        return
    shares = [ceil(w.numel / rank.ranks_of(w.name)) for w in weights]
    _to_host(rank, 4 * sum(shares), "gradients")
    if rank.plan.zero == 3:
        return
    element = max(itemsize(rank.attrs[w.sid]) for w in weights)
    largest = max(w.numel for w in weights) * element
    rank.add(largest, COMMUNICATION, "zero.temp_grad_buffer_for_gpu_offload", alloc_at=rank.at(0, 4), free_at=None)
    rank.buffers["ZeRO-Offload gradient hand-over buffer"] = largest
    _to_host(rank, largest + sum(shares) * element, "buffers")


def _to_host(rank: Rank, nbytes: int, kind: str) -> None:
    rank.host[kind] = rank.host.get(kind, 0) + nbytes
