"""Ground truth: run a workload for real on the CPU and read its peak from the profiler."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from vramsim.config import SimulationConfig
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.build import build_program
from vramsim.workload.models import ModelSource
from vramsim.workload.program import Program, run_program
from vramsim.workload.quiet import quiet_profiler

__all__ = ["Measurement", "RealRun", "measure_cpu", "measure_cuda", "measure_program_cpu"]

_STEP_MARK = "vramsim::step"


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """What c10's CPU allocator reported during a real run."""

    peak_bytes: int
    """Highest total allocated bytes during the last step (everything the run allocated counts)."""
    allocations: int
    """Allocation events seen in the last step (0 where the allocator does not report them)."""
    reserved_bytes: int | None = None
    """``max_memory_reserved`` over the last step; CUDA only."""


class RealRun:
    """A real run has no phases or roles to record; generators it is handed are still drained,
    so the run does the same work as when traced."""

    def set_phase(self, phase: Phase) -> None:
        pass

    def mark(self, tensors: Any, category: Category) -> None:
        for _ in tensors:
            pass

    def mark_owned(self, owned: Any, category: Category) -> None:
        for _ in owned:
            pass

    def begin_unit(self, module: str, tensors: Any, positional: Any = ()) -> None:
        pass

    def end_unit(self) -> None:
        pass


class _MarkingObserver(RealRun):
    """Brackets each step in a profiler range so its allocations can be told apart."""

    def __init__(self) -> None:
        self._range: contextlib.AbstractContextManager[Any] | None = None

    def begin_step(self, step: int) -> None:
        self._range = record_function(f"{_STEP_MARK}{step}")
        self._range.__enter__()

    def end_step(self) -> None:
        assert self._range is not None
        self._range.__exit__(None, None, None)


def measure_cpu(model: ModelSource, config: SimulationConfig, *, seed: int = 0) -> Measurement:
    """Build the workload on the CPU inside the profiler and run it, so every byte is seen."""
    return measure_program_cpu(lambda: build_program(model, config, device="cpu"), seed=seed)


def measure_program_cpu(build: Callable[[], Program], *, seed: int = 0) -> Measurement:
    """Build a program on the CPU inside the profiler (so its weights are seen too) and run it. Garbage
    left in reference cycles before it is collected first, and the collector waits until the run ends:
    a collection inside the profile would free older tensors and lower the running total by their bytes."""
    torch.manual_seed(seed)
    gc.collect()
    gc.disable()
    try:
        with quiet_profiler(profile(activities=[ProfilerActivity.CPU], profile_memory=True)) as prof:
            program = build()
            steps = program.steps
            run_program(program, _MarkingObserver())
            del program
    finally:
        gc.enable()
    return _last_step_peak(prof, steps - 1)


def _last_step_peak(prof: profile, step: int) -> Measurement:
    """Peak of live bytes allocated inside the profiled run, over the last step.

    c10's reporter keeps one running total per process, and a tensor an earlier test left in a cache may be
    freed inside this run, lowering that total by bytes this run never allocated. So the live bytes are
    summed from this run's own allocations, each until the free of its address; a free of anything
    allocated before the run (the reporter knows its size from an earlier profiled run) is ignored.
    """
    assert prof.profiler is not None and prof.profiler.kineto_results is not None  # set when the profile ends
    events = _flatten(prof.profiler.kineto_results.experimental_event_tree())
    marks = [e for e in events if e.name == f"{_STEP_MARK}{step}"]
    start, end = marks[0].start_time_ns, marks[0].end_time_ns
    allocations = sorted(
        (e for e in events if e.tag == torch._C._profiler._EventType.Allocation and e.typed[1].alloc_size != 0),
        key=lambda e: e.start_time_ns,
    )
    live: dict[int, int] = {}
    total = 0
    totals: list[int] = []
    for event in allocations:
        fields = event.typed[1]
        if fields.alloc_size > 0:
            live[fields.ptr] = fields.alloc_size
            total += fields.alloc_size
            if start <= event.start_time_ns <= end:
                totals.append(total)
        else:
            total -= live.pop(fields.ptr, 0)
    return Measurement(peak_bytes=max(totals, default=0), allocations=len(totals))


def _flatten(roots: list[Any]) -> list[Any]:
    out: list[Any] = []
    stack = list(roots)
    while stack:
        event = stack.pop()
        out.append(event)
        stack.extend(event.children)
    return out


class _PeakResetObserver(RealRun):
    """Resets the CUDA allocator's peak counters when the last step begins."""

    def __init__(self, last_step: int) -> None:
        self._last = last_step

    def begin_step(self, step: int) -> None:
        if step == self._last:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def end_step(self) -> None:
        torch.cuda.synchronize()


def measure_cuda(model: ModelSource, config: SimulationConfig, *, seed: int = 0) -> Measurement:
    """Run the workload on ``cuda:0`` and read ``max_memory_allocated/reserved`` over the last step."""
    torch.manual_seed(seed)
    torch.cuda.empty_cache()
    program = build_program(model, config, device="cuda", foreach=True)
    run_program(program, _PeakResetObserver(config.steps - 1))
    measured = Measurement(
        peak_bytes=torch.cuda.max_memory_allocated(),
        allocations=0,
        reserved_bytes=torch.cuda.max_memory_reserved(),
    )
    del program
    torch.cuda.empty_cache()
    return measured
