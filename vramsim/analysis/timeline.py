"""The report's memory timeline: the steady-state step of its replay, sampled for a plot with every peak kept."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

import networkx as nx

from vramsim.analysis.device_memory import DeviceMemory
from vramsim.estimators.assumptions import totals
from vramsim.estimators.liveness import OVERHEAD_CATEGORY
from vramsim.estimators.timeline import Block, Timeline
from vramsim.results.timeline import MemoryTimeline, PhaseSpan, TimelinePoint
from vramsim.tracer.graph import storage_nodes

__all__ = ["TIMELINE_POINTS", "memory_timeline"]

TIMELINE_POINTS = 3000
"""Most points a timeline keeps: about what a laptop screen's plot can tell apart (three per pixel column
of a 1000-pixel plot: the lowest and highest allocated, the highest reserved), and light enough for a browser."""

_KEPT_PER_BUCKET = 3


def memory_timeline(
    graph: nx.MultiDiGraph | None,
    timeline: Timeline,
    memory: DeviceMemory,
    *,
    component_phases: dict[str, str] | None = None,
    usable_bytes: int | None,
    capacity_bytes: int | None,
) -> MemoryTimeline:
    """The last step of ``timeline`` as ``memory`` replayed it, at most ``TIMELINE_POINTS`` points.

    ``graph``: the traced program's, which gives each free the phase of the op running then (not its block's)
    and each block its tensor's shape and dtype; ``None`` for a timeline built without a trace (a checkpoint's
    save and restore), whose blocks carry their own phase. ``component_phases``: a pipeline's phase by
    component (``Program.phases``), which an event's module names.
    """
    first, last = timeline.steps[-1]
    allocated, reserved = memory.live.allocated, memory.live.reserved
    kept = _sampled(allocated, reserved, first, last) | {memory.peak_index}
    reserved_peak = max(range(first, last + 1), key=reserved.__getitem__) if last >= first else first
    kept.add(reserved_peak)
    phases = _running_phases(graph, timeline, component_phases or {}, last)
    shapes = _traced_shapes(graph) if graph is not None else []
    points = [
        _point(index, timeline, memory, categories, phases[index], shapes)
        for index, categories in _categories_at(timeline, memory, sorted(kept))
    ]
    added = totals(memory.overheads)
    return MemoryTimeline(
        first_event=first,
        last_event=last,
        points=points,
        peak_event=memory.peak_index,
        reserved_peak_event=reserved_peak,
        phases=_spans(phases, first, last),
        reserved_overhead_bytes=added.reserved - added.allocated,
        device_overhead_bytes=added.device - added.reserved,
        usable_bytes=usable_bytes,
        capacity_bytes=capacity_bytes,
    )


def _sampled(allocated: list[int], reserved: list[int], first: int, last: int) -> set[int]:
    """Every event of a step that has no more than ``TIMELINE_POINTS``; else per bucket of events, the lowest
    and highest allocated and the highest reserved, and the step's ends."""
    count = last - first + 1
    if count <= TIMELINE_POINTS:
        return set(range(first, last + 1))
    buckets = (TIMELINE_POINTS - 4) // _KEPT_PER_BUCKET
    kept = {first, last}
    for bucket in range(buckets):
        span = range(first + bucket * count // buckets, first + (bucket + 1) * count // buckets)
        kept.add(min(span, key=allocated.__getitem__))
        kept.add(max(span, key=allocated.__getitem__))
        kept.add(max(span, key=reserved.__getitem__))
    return kept


def _categories_at(timeline: Timeline, memory: DeviceMemory, indices: list[int]) -> list[tuple[int, dict[str, int]]]:
    """Bytes by category right after each of ``indices`` (ascending), in one pass over the events."""
    sizes, blocks = memory.live.sizes, timeline.blocks
    totals_now: dict[str, int] = defaultdict(int)
    found = []
    wanted = iter(indices)
    target = next(wanted, None)
    for index, (key, is_alloc) in enumerate(timeline.events):
        if target is None:
            break
        if index == timeline.preexisting and memory.live.overhead_bytes:
            totals_now[OVERHEAD_CATEGORY] += memory.live.overhead_bytes
        totals_now[blocks[key].category] += sizes[key] if is_alloc else -sizes[key]
        if index == target:
            found.append((index, {name: size for name, size in totals_now.items() if size}))
            target = next(wanted, None)
    return found


def _running_phases(graph: nx.MultiDiGraph | None, timeline: Timeline, component_phases: dict[str, str], last: int) -> list[str]:
    """The phase running at each event up to ``last``: an allocation's block's, a free's that of the op
    running at its clock (a block freed in backward was allocated in forward); in a pipeline, the phase
    of the component the module names, and outside any component the one running before."""
    nodes = graph.nodes(data=True) if graph is not None else []
    ops = sorted((a["clock_after"], a["phase"], a["module"]) for node, a in nodes if node[0] == "op")
    clocks = [clock for clock, _, _ in ops]
    phases = []
    running = ""
    for key, is_alloc in timeline.events[: last + 1]:
        block = timeline.blocks[key]
        phase, module = block.phase, block.module
        if not is_alloc and block.free_at is not None:
            at = bisect_left(clocks, block.free_at[0])
            if at < len(ops):
                _, phase, module = ops[at]
        if component_phases:
            phase = component_phases.get(module.partition(".")[0]) or running or phase
            running = phase
        phases.append(phase)
    return phases


def _spans(phases: list[str], first: int, last: int) -> list[PhaseSpan]:
    """Consecutive events of one phase over ``first..last``."""
    spans: list[PhaseSpan] = []
    for index in range(first, last + 1):
        if spans and spans[-1].phase == phases[index]:
            continue
        if spans:
            spans[-1] = PhaseSpan(phase=spans[-1].phase, first_event=spans[-1].first_event, last_event=index - 1)
        spans.append(PhaseSpan(phase=phases[index], first_event=index, last_event=last))
    return spans


_Traced = tuple[tuple[int, ...], str, str, str]
"""A traced storage's shape, dtype, op and module."""


def _traced_shapes(graph: nx.MultiDiGraph) -> list[_Traced]:
    """Each traced storage's shape and dtype (and what tells it is the block at hand), by sid."""
    return [(tuple(a["shape"]), str(a["dtype"]), a["op"], a["module"]) for _, a in storage_nodes(graph)]


def _point(
    index: int,
    timeline: Timeline,
    memory: DeviceMemory,
    categories: dict[str, int],
    phase: str,
    shapes: list[_Traced],
) -> TimelinePoint:
    key, is_alloc = timeline.events[index]
    block = timeline.blocks[key]
    shape, dtype = _shape_of(block, key, shapes)
    return TimelinePoint(
        event=index,
        allocated_bytes=memory.live.allocated[index],
        reserved_bytes=memory.live.reserved[index],
        categories=categories,
        allocates=is_alloc,
        nbytes=memory.live.sizes[key],
        op=block.op,
        module=block.module,
        phase=phase,
        step=block.step,
        shape=shape,
        dtype=dtype,
    )


def _shape_of(block: Block, key: int, shapes: list[_Traced]) -> tuple[tuple[int, ...] | None, str | None]:
    """The shape and dtype of the traced storage behind a block: its ``copy_of`` (a what-if's block in a traced
    one's image), else its key; a timeline that re-keys its blocks (a derived generation, a pipeline stage)
    is told apart by the storage's op and module, and such a block has none."""
    sid = block.copy_of if block.copy_of is not None else key
    if sid >= len(shapes):
        return None, None
    shape, dtype, op, module = shapes[sid]
    return (shape, dtype) if (op, module) == (block.op, block.module) else (None, None)
