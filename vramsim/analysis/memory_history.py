"""The report's timeline replayed once more with the allocator recording: its history, segments and tensors.

The replay is the one the figures come from (``device_memory.allocator_replay``, without a limit), so the
history's allocated and reserved bytes rise and fall as the report's do. Made only when asked.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx

from vramsim.analysis.device_memory import DeviceMemory, allocator_replay
from vramsim.estimators.allocator_history import HistoryEntry, SegmentState
from vramsim.estimators.assumptions import totals
from vramsim.estimators.liveness import OVERHEAD_CATEGORY
from vramsim.estimators.timeline import Block, Timeline
from vramsim.results.memory_history import (
    AllocatorAction,
    HistoryTensor,
    MemoryHistory,
    SegmentBlock,
    SegmentRecord,
    TracedOp,
)
from vramsim.tracer.graph import storage_nodes
from vramsim.tracer.records import OpRecord
from vramsim.workload.targets import Target

__all__ = ["memory_history"]


def memory_history(
    graph: nx.MultiDiGraph,
    ops: list[OpRecord],
    timeline: Timeline,
    memory: DeviceMemory,
    target: Target,
    *,
    expandable_segments: bool,
    empty_cache_steps: int | None,
) -> MemoryHistory:
    """``timeline`` (the report's, ``memory`` its replay) replayed with the allocator recording, on a GPU
    ``target`` (the config refuses the cpu, which has no caching allocator)."""
    overhead = memory.live.overhead_bytes
    allocator, live = allocator_replay(timeline, target.profile, expandable_segments, empty_cache_steps, overhead, record=True)
    assert allocator.history is not None and live.allocated == memory.live.allocated, "the recorded replay must be the report's"
    added = totals(memory.overheads)
    tensors = _tensors(graph, timeline, overhead)
    event = _event_of_call(timeline, overhead)
    return MemoryHistory(
        actions=[_action(entry, event(entry.call), len(timeline.blocks)) for entry in allocator.history],
        segments=[_segment(state, len(timeline.blocks)) for state in allocator.segments()],
        tensors=tensors,
        events=len(timeline.events),
        event_clocks=[_clock(timeline.blocks[key], is_alloc) for key, is_alloc in timeline.events],
        ops=[
            TracedOp(name=op.name, module=op.module, phase=str(op.phase), step=op.step, clock_after=op.clock_after) for op in ops
        ],
        steady_first_event=timeline.steps[-1][0] if timeline.steps else 0,
        expandable_segments=allocator.config.uses_expandable_segments,
        allocated_overhead_bytes=overhead,
        reserved_overhead_bytes=added.reserved - added.allocated,
    )


def _clock(block: Block, is_alloc: bool) -> int:
    """The trace clock an event sits at (a free event's block always has a ``free_at``)."""
    position = block.alloc_at if is_alloc else block.free_at
    assert position is not None
    return position[0]


def _event_of_call(timeline: Timeline, overhead: int) -> Callable[[int], int]:
    """The timeline event of each allocator call: the overhead's malloc, made right before the event
    ``preexisting`` (``liveness``), shares that event's index and shifts the calls after it by one."""
    extra = timeline.preexisting if overhead and timeline.preexisting < len(timeline.events) else None

    def event(call: int) -> int:
        return call if extra is None or call <= extra else call - 1

    return event


def _tensors(graph: nx.MultiDiGraph, timeline: Timeline, overhead: int) -> list[HistoryTensor]:
    """One per timeline block (by key), then the allocated overhead's. A block is a traced storage where it is
    allocated at that storage's own position (a traced clock allocates one storage)."""
    storages = list(storage_nodes(graph))
    at_position = {attrs["alloc_at"]: sid for sid, attrs in storages}
    tensors = []
    for block in timeline.blocks:
        sid = at_position.get(block.alloc_at) if block.copy_of is None else None
        traced = sid if sid is not None else block.copy_of
        attrs = storages[traced][1] if traced is not None else None
        tensors.append(
            HistoryTensor(
                op=block.op,
                module=block.module,
                phase=block.phase,
                step=block.step,
                category=block.category,
                nbytes=block.nbytes,
                shape=None if attrs is None else tuple(attrs["shape"]),
                dtype=None if attrs is None else str(attrs["dtype"]),
                sid=sid,
                copy_of=block.copy_of,
            )
        )
    tensors.append(
        HistoryTensor(
            op="",
            module="",
            phase="",
            step=-1,
            category=OVERHEAD_CATEGORY,
            nbytes=overhead,
            shape=None,
            dtype=None,
            sid=None,
            copy_of=None,
        )
    )
    return tensors


def _tensor_index(key: int | None, overhead_index: int) -> int | None:
    """The storage key's tensor: the overhead's key (negative) is the last tensor."""
    if key is None:
        return None
    return overhead_index if key < 0 else key


def _action(entry: HistoryEntry, event: int, overhead_index: int) -> AllocatorAction:
    return AllocatorAction(
        action=entry.action, addr=entry.addr, size=entry.size, event=event, tensor=_tensor_index(entry.key, overhead_index)
    )


def _segment(state: SegmentState, overhead_index: int) -> SegmentRecord:
    return SegmentRecord(
        address=state.address,
        size=state.size,
        small=state.small,
        expandable=state.expandable,
        blocks=[SegmentBlock(address=a, size=s, tensor=_tensor_index(k, overhead_index)) for a, s, k in state.blocks],
    )
