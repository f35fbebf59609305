"""Reading c10's real allocator events from a CPU profile: the ground truth the rules are checked against."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def memory_profile() -> Iterator[profile]:
    """A CPU profile of c10's allocations with no stray frees in it: garbage an earlier test left in
    reference cycles is collected first, and the collector waits until the profile ends (a collection
    inside it would free those old tensors and lower the running total by their bytes)."""
    gc.collect()
    gc.disable()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            yield prof
    finally:
        gc.enable()


def transient_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes c10 held inside ``fn`` beyond what it still holds at the end (its outputs)."""
    with memory_profile() as prof:
        result = fn()
    del result
    peak, final = allocation_trace(prof)
    return peak - final


@contextlib.contextmanager
def fake_process_group(world_size: int, mesh_shape: tuple[int, ...] | None = None, *, rank: int = 0) -> Iterator[object]:
    """Rank ``rank`` of ``world_size`` under torch's fake process group, on one process: collectives return
    at once, so torch's own distributed code (FSDP2, DDP, DTensor, pipelining) runs with a rank's real buffers.
    ``mesh_shape``: HSDP's 2-D (replicate, shard) mesh instead of one of ``world_size`` ranks."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        names = ("replicate", "shard") if mesh_shape and len(mesh_shape) == 2 else None
        yield init_device_mesh("cpu", mesh_shape or (world_size,), mesh_dim_names=names)
    finally:
        dist.destroy_process_group()
