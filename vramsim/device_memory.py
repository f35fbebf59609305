"""From a timeline to what the device would show: allocator rounding, cache, overheads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramsim.estimators.allocator import AllocatorConfig, CachingAllocator
from vramsim.estimators.assumptions import Overhead, overheads_for, totals
from vramsim.estimators.liveness import Liveness, liveness
from vramsim.estimators.timeline import Timeline

from .targets import Target

__all__ = ["DeviceMemory", "device_memory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMemory:
    """The three counters a user sees on the device over the steady-state (last) step, and the
    replay they come from."""

    live: Liveness
    peak_bytes: int
    """``max_memory_allocated()``: the highest ``live.allocated`` over the last step."""
    peak_index: int
    """The event at which it is reached: the moment the breakdown and the peak site describe."""
    reserved_bytes: int
    """``max_memory_reserved()``: segments the caching allocator holds, plus reserved overheads."""
    device_bytes: int
    """What nvidia-smi would show: reserved plus context and communication buffers."""
    overheads: list[Overhead]


def device_memory(
    timeline: Timeline, target: Target, *, training: bool, expandable_segments: bool = False, world_size: int = 1
) -> DeviceMemory:
    """Replay ``timeline`` on ``target``: through the caching allocator on a GPU, as is on the CPU
    (no caching allocator and no context to add: all three counters are the peak). ``world_size``
    > 1 adds NCCL's buffers."""
    first, last = timeline.steps[-1]
    if target.profile.vendor == "cpu":
        live = liveness(timeline)
        peak, index = live.peak(first, last)
        return DeviceMemory(live=live, peak_bytes=peak, peak_index=index, reserved_bytes=peak, device_bytes=peak,
                            overheads=[])  # fmt: skip
    overheads = overheads_for(target.profile, world_size=world_size, training=training)
    added = totals(overheads)
    platform: Literal["cuda", "rocm"] = "rocm" if target.profile.vendor == "amd" else "cuda"
    allocator = CachingAllocator(AllocatorConfig(platform=platform, expandable_segments=expandable_segments))
    live = liveness(timeline, allocator, overhead_bytes=added.allocated)
    peak, index = live.peak(first, last)
    reserved = live.peak_reserved_bytes + (added.reserved - added.allocated)
    return DeviceMemory(
        live=live, peak_bytes=peak, peak_index=index, reserved_bytes=reserved,
        device_bytes=reserved + (added.device - added.reserved), overheads=overheads,
    )  # fmt: skip
