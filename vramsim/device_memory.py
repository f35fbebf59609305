"""From the traced program to what the device would show: allocator rounding, cache, overheads."""

from __future__ import annotations

from dataclasses import dataclass

from vramsim.estimators.allocator import AllocatorConfig, CachingAllocator
from vramsim.estimators.assumptions import Overhead, overheads_for, totals
from vramsim.tracer.records import Trace

from .targets import Target

__all__ = ["DeviceMemory", "device_memory"]

_OVERHEAD_KEY = -1
"""Allocator key of the assumed BLAS workspace, made before the first step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMemory:
    """The three counters a user sees on the device, over the steady-state step."""

    allocated_bytes: int
    """``max_memory_allocated()``: rounded blocks plus allocated overheads."""
    reserved_bytes: int
    """``max_memory_reserved()``: segments the caching allocator holds."""
    device_bytes: int
    """What nvidia-smi would show: reserved plus context and communication buffers."""
    overheads: list[Overhead]


def device_memory(
    trace: Trace, target: Target, peak_bytes: int, *, training: bool, expandable_segments: bool = False
) -> DeviceMemory:
    """Replay the trace through the caching allocator, resetting peaks where the last step begins.

    The CPU has no caching allocator and no context to add: all three counters are the peak.
    """
    if target.profile.vendor == "cpu":
        return DeviceMemory(allocated_bytes=peak_bytes, reserved_bytes=peak_bytes, device_bytes=peak_bytes, overheads=[])
    overheads = overheads_for(target.profile, training=training)
    added = totals(overheads)
    platform = "rocm" if target.profile.vendor == "amd" else "cuda"
    allocator = CachingAllocator(AllocatorConfig(platform=platform, expandable_segments=expandable_segments))
    baseline = [s for s in trace.storages if s.alloc_clock == 0]
    for record in baseline:
        allocator.malloc(record.sid, record.nbytes)
    if added.allocated:
        allocator.malloc(_OVERHEAD_KEY, added.allocated)
    first_clock, _ = trace.step_clocks[-1]
    for clock, (sid, is_alloc) in enumerate(trace.events, start=1):
        if clock == first_clock:
            allocator.reset_peak_stats()
        if is_alloc:
            allocator.malloc(sid, trace.storages[sid].nbytes)
        else:
            allocator.free(sid)
    stats = allocator.stats()
    extra = added.device - added.reserved
    return DeviceMemory(
        allocated_bytes=stats.peak_allocated_bytes,
        reserved_bytes=stats.peak_reserved_bytes + (added.reserved - added.allocated),
        device_bytes=stats.peak_reserved_bytes + (added.reserved - added.allocated) + extra,
        overheads=overheads,
    )
