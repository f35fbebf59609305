"""The allocator's history as a Chrome trace (Perfetto, chrome://tracing): the ops as slices, memory as counters.

Time is one tick (1 "µs") per traced op, in program order: not wall time, which a meta-device trace
does not have. Op ``i`` is the slice ``[i + 1, i + 2)``, nested inside a slice per module of its path
(as the profiler's ``with_modules`` shows ``nn.Module`` calls); tick 0 holds what existed before the
first op (weights, inputs), and a last tick what a what-if placed after the last op. The allocator's
actions are spread evenly inside the tick of the op they belong to (the events between two ops in
the next op's tick), so every peak is drawn. Memory is written twice: ``[memory]`` instant events as
``torch.profiler``'s ``export_chrome_trace`` writes them (``Bytes``, ``Total Allocated``,
``Total Reserved``), and ``ph: "C"`` counter events (``allocated``, ``reserved``) that Perfetto
draws as tracks.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import Counter
from pathlib import Path
from typing import Any

from vramsim.results.memory_history import MemoryHistory, TracedOp

__all__ = ["chrome_trace", "write_chrome_trace"]

_PID = 0
_OPS_TID = 0
_PHASES_TID = 1
_CUDA_DEVICE_TYPE = 1
"""``Device Type`` of a CUDA device in the profiler's ``[memory]`` events (``c10::DeviceType::CUDA``)."""
_GROWS = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
_HOLDS = {"alloc": 1, "free_completed": -1}


def chrome_trace(history: MemoryHistory) -> dict[str, Any]:
    """The trace's JSON object (``traceEvents``), ready for ``json.dump``."""
    events: list[dict[str, Any]] = [
        _meta("process_name", None, "vramsim (simulated GPU 0)"),
        _meta("thread_name", _OPS_TID, "ops by module"),
        _meta("thread_name", _PHASES_TID, "phases"),
    ]
    events += _op_slices(history.ops)
    events += _phase_slices(history.ops)
    events += _memory_events(history)
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"time_axis": "one tick per traced op"}}


def write_chrome_trace(history: MemoryHistory, path: str | Path) -> Path:
    """Write the trace of ``history`` as JSON to ``path``; the path written."""
    target = Path(path)
    with target.open("w") as file:
        json.dump(chrome_trace(history), file, separators=(",", ":"))
    return target


def _meta(name: str, tid: int | None, value: str) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "M", "name": name, "pid": _PID, "args": {"name": value}}
    if tid is not None:
        event["tid"] = tid
    return event


def _slice(name: str, start: float, end: float, tid: int, category: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "cat": category, "name": name, "pid": _PID, "tid": tid, "ts": start, "dur": end - start, "args": args}


def _op_slices(ops: list[TracedOp]) -> list[dict[str, Any]]:
    """Each op's slice, inside one slice per level of its module path for each run of ops in that module."""
    slices = []
    open_modules: list[tuple[str, int]] = []  # (module path, first tick), outermost first
    for index, op in enumerate(ops):
        tick = index + 1
        path = op.module.split(".") if op.module else []
        chain = [".".join(path[: depth + 1]) for depth in range(len(path))]
        while open_modules and (len(open_modules) > len(chain) or open_modules[-1][0] != chain[len(open_modules) - 1]):
            name, start = open_modules.pop()
            slices.append(_slice(name.rsplit(".", 1)[-1], start, tick, _OPS_TID, "module", {"module": name}))
        for module in chain[len(open_modules) :]:
            open_modules.append((module, tick))
        args = {"module": op.module, "phase": op.phase, "step": op.step, "op_index": index}
        slices.append(_slice(op.name, tick, tick + 1, _OPS_TID, "cpu_op", args))
    while open_modules:
        name, start = open_modules.pop()
        slices.append(_slice(name.rsplit(".", 1)[-1], start, len(ops) + 1, _OPS_TID, "module", {"module": name}))
    return slices


def _phase_slices(ops: list[TracedOp]) -> list[dict[str, Any]]:
    """One slice per run of ops in the same step and phase (forward, backward, optimizer...)."""
    slices = []
    start = 0
    for index in range(1, len(ops) + 1):
        if index == len(ops) or (ops[index].phase, ops[index].step) != (ops[start].phase, ops[start].step):
            op = ops[start]
            args = {"phase": op.phase, "step": op.step}
            slices.append(_slice(f"{op.phase} (step {op.step})", start + 1, index + 1, _PHASES_TID, "phase", args))
            start = index
    return slices


def _memory_events(history: MemoryHistory) -> list[dict[str, Any]]:
    """``[memory]`` instants per block action and an allocated/reserved counter per timeline event."""
    ticks = _event_ticks(history)
    allocated = reserved = 0
    events = []
    actions = history.actions
    for position, action in enumerate(actions):
        ts = ticks[action.event]
        allocated += _HOLDS.get(action.action, 0) * action.size
        reserved += _GROWS.get(action.action, 0) * action.size
        if action.action in _HOLDS:
            args = {
                "Device Type": _CUDA_DEVICE_TYPE,
                "Device Id": 0,
                "Addr": action.addr,
                "Bytes": _HOLDS[action.action] * action.size,
                "Total Allocated": allocated,
                "Total Reserved": reserved,
            }
            events.append(
                {
                    "ph": "i",
                    "cat": "cpu_instant_event",
                    "s": "t",
                    "name": "[memory]",
                    "pid": _PID,
                    "tid": _OPS_TID,
                    "ts": ts,
                    "args": args,
                }
            )
        if position + 1 == len(actions) or actions[position + 1].event != action.event:
            counter = {"allocated": allocated, "reserved": reserved}
            events.append({"ph": "C", "name": "GPU 0 memory", "pid": _PID, "ts": ts, "args": counter})
    return events


def _event_ticks(history: MemoryHistory) -> list[float]:
    """The time of each timeline event: inside the tick of the op it belongs to, the tick's events evenly spread."""
    afters = [op.clock_after for op in history.ops]
    ticks = [0 if clock == 0 else 1 + bisect_left(afters, clock) for clock in history.event_clocks]
    per_tick = Counter(ticks)
    seen: Counter[int] = Counter()
    times = []
    for tick in ticks:
        seen[tick] += 1
        times.append(tick + seen[tick] / (per_tick[tick] + 1))
    return times
