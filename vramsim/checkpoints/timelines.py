"""A checkpoint's save or restore as a memory timeline, for the page ``vramsim checkpoint --html`` draws."""

from __future__ import annotations

from vramsim.analysis.device_memory import DeviceMemory
from vramsim.analysis.timeline import memory_timeline
from vramsim.estimators.timeline import Timeline
from vramsim.results.timeline import MemoryTimeline
from vramsim.workload.targets import Target

__all__ = ["checkpoint_timeline"]


def checkpoint_timeline(timeline: Timeline, memory: DeviceMemory, target: Target, headroom: float) -> MemoryTimeline:
    """The save's or the restore's timeline as ``memory`` replayed it, sampled; built without a trace, each block
    carries its own phase and no tensor's shape."""
    capacity = target.profile.memory_bytes
    usable = None if capacity is None else int(capacity * (1 - headroom))
    return memory_timeline(None, timeline, memory, usable_bytes=usable, capacity_bytes=capacity)
