"""Reading c10's real allocator events from a CPU profile: the ground truth the rules are checked against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile


def allocation_trace(prof: profile) -> tuple[int, int]:
    """(peak, final) running total of the bytes allocated inside the profile."""
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == torch._C._profiler._EventType.Allocation:
            events.append((event.start_time_ns, event.typed[1].alloc_size))
        stack.extend(event.children)
    running = peak = 0
    for _, size in sorted(events):
        running += size
        peak = max(peak, running)
    return peak, running


def transient_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes c10 held inside ``fn`` beyond what it still holds at the end (its outputs)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    del result
    peak, final = allocation_trace(prof)
    return peak - final
