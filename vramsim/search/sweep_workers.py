"""Where a sweep's traces run: local worker processes (joblib, the default) or an existing Ray cluster.

A worker builds one point's program on meta, traces it and returns the records (``Trace``), never a figure: the
driver builds the graph and runs every analysis, so an answer does not depend on where its trace ran. A trace that
fails (a ``VramsimError``: a length past the model's positions, say) comes back as its reason. A worker that dies
(killed, out of host memory) is retried once, then its point is reported as failed: locally, the tasks lost with a
dead worker run again one at a time, so a second death is the task's own; on Ray, ``max_retries=1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError, VramsimError
from vramsim.tracer.records import Trace
from vramsim.workload.models import ModelSource
from vramsim.workload.targets import resolve_target

__all__ = ["BACKENDS", "Backend", "Failed", "TraceTask", "in_processes", "run_traces", "trace_records"]

Item = TypeVar("Item")
Result = TypeVar("Result")
Backend = Literal["local", "ray"]
BACKENDS: tuple[str, ...] = get_args(Backend)
"""``local``: worker processes on this machine (joblib's loky); ``ray``: the tasks of a Ray cluster."""


@dataclass(frozen=True, slots=True)
class TraceTask:
    """One point to trace: the model and ``simulate``'s options at that point."""

    model: ModelSource
    options: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Failed:
    """A point whose trace gave no records, and why."""

    reason: str


def trace_records(task: TraceTask) -> Trace | Failed:
    """A worker's job: build and trace one point, as ``simulate`` traces it (checkpointable blocks marked)."""
    try:
        config = SimulationConfig.from_options(**task.options)
        _, _, trace = build_and_trace(task.model, config, resolve_target(config.device), checkpointing="marked")
    except VramsimError as exc:
        return Failed(str(exc))
    return trace


def run_traces(
    tasks: Sequence[TraceTask],
    *,
    backend: Backend = "local",
    address: str | None = None,
    jobs: int | None = None,
    told: Callable[[], None] = lambda: None,
    work: Callable[[TraceTask], Trace | Failed] = trace_records,
) -> list[Trace | Failed]:
    """Each task's records (or why it has none), in order; ``told`` after each; ``work`` runs in the workers
    (``jobs`` local ones, default one per CPU; ``jobs=1``: in this process)."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"jobs must be 1 or more, got {jobs}")
    if not tasks:
        return []
    if backend == "ray":
        return _on_ray(work, tasks, address, told)
    if jobs == 1:  # in this process, one after the other: no worker to start (or to die)
        return [_told(work(task), told) for task in tasks]
    return _local(work, tasks, jobs or os.cpu_count() or 1, told)


def _told(outcome: Trace | Failed, told: Callable[[], None]) -> Trace | Failed:
    told()
    return outcome


def _local(
    work: Callable[[TraceTask], Trace | Failed], tasks: Sequence[TraceTask], jobs: int, told: Callable[[], None]
) -> list[Trace | Failed]:
    """joblib's worker processes; the tasks lost with a dead worker run again, one at a time, once."""
    done = in_processes(work, tasks, max(2, min(jobs, len(tasks))), lambda _: told())  # one job would run here
    for index in [i for i in range(len(tasks)) if i not in done]:
        again = in_processes(work, [tasks[index]], 2, lambda _: told())
        if 0 in again:
            done[index] = again[0]
        else:
            done[index] = Failed("its worker process died twice (retried once)")
            told()
    return [done[index] for index in range(len(tasks))]


def in_processes(
    work: Callable[[Item], Result], items: Sequence[Item], workers: int, told: Callable[[Result], None]
) -> dict[int, Result]:
    """Each item's ``work`` in ``workers`` of joblib's local worker processes, by the item's index, ``told`` each
    as it returns; the items lost with a worker that died are missing (the caller decides what they become)."""
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    done: dict[int, Result] = {}
    calls = (delayed(_numbered)(work, index, item) for index, item in enumerate(items))
    try:
        for index, outcome in Parallel(n_jobs=workers, return_as="generator_unordered")(calls):
            done[index] = outcome
            told(outcome)
    except TerminatedWorkerError:
        pass
    return done


def _numbered(work: Callable[[Item], Result], index: int, item: Item) -> tuple[int, Result]:
    return index, work(item)


def _on_ray(
    work: Callable[[TraceTask], Trace | Failed], tasks: Sequence[TraceTask], address: str | None, told: Callable[[], None]
) -> list[Trace | Failed]:
    """Ray tasks (``max_retries=1``: a task whose worker dies runs once more); the cluster is the one this process
    is connected to, else ``ray.init(address=address)`` (``None``: ``RAY_ADDRESS``, or Ray starts one here)."""
    try:
        import ray
        from ray.exceptions import RayError, RayTaskError
    except ImportError:
        raise UnsupportedError("--backend ray needs Ray: pip install 'vramsim[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(max_retries=1)(work)
    pending = {remote.remote(task): index for index, task in enumerate(tasks)}
    done: dict[int, Trace | Failed] = {}
    waiting = list(pending)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1)
        index = pending[ready[0]]
        try:
            done[index] = ray.get(ready[0])
        except RayTaskError:
            raise  # the trace itself raised what it should not: a defect, not the cluster's
        except RayError as exc:
            done[index] = Failed(f"its Ray worker died twice (retried once): {type(exc).__name__}")
        told()
    return [done[index] for index in range(len(tasks))]
