"""Independent traces in worker processes: the wall time of several is the longest one's, not their sum.

The workers are forked from this process (Linux's ``fork``): they start at once with everything it imported
(torch, transformers, the model's code), and nothing re-runs the caller's ``__main__`` (as ``spawn`` and
``forkserver`` do, which a script without a ``__main__`` guard does not survive). A job is a picklable callable
taking a ``progress`` function; what it tells there is relayed to the caller's ``progress`` as it happens (each
further trace, as when it runs here), and its result or its error comes back as the job would have returned or
raised it here. Every figure is still the job's own trace: where it ran changes nothing.

With one CPU, or one job, or no ``fork`` (macOS's and Windows' Python), or a job that cannot be sent to another
process (a model built by a lambda), the jobs run here one after the other. Known limitation: each worker holds
one trace in memory at a time, so up to ``workers`` traces of the model are in memory at once.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

__all__ = ["available_cpus", "run_jobs"]

T = TypeVar("T")
Job = Callable[[Callable[[str], None]], T]

_relay: Any = None
"""In a worker: the queue its jobs' progress goes to."""


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container or ``taskset`` limits it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_jobs(jobs: Sequence[Job[T]], *, progress: Callable[[str], None] | None = None, workers: int | None = None) -> list[T]:
    """Each job's result, in the order given; ``workers``: the most processes at once (default: one per CPU)."""
    told = progress or _ignore
    count = min(len(jobs), workers or available_cpus())
    if count < 2 or sys.platform != "linux" or not _sendable(jobs):
        return [job(told) for job in jobs]
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    relay = threading.Thread(target=_relay_progress, args=(queue, told), daemon=True)
    relay.start()
    pool = concurrent.futures.ProcessPoolExecutor(count, mp_context=context, initializer=_start_worker, initargs=(queue,))
    try:
        futures = [pool.submit(_run, job) for job in jobs]
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # an error: the jobs not started are dropped
        queue.put(None)
        relay.join()


def _sendable(jobs: Sequence[Job[Any]]) -> bool:
    try:
        pickle.dumps(list(jobs))
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return True


def _ignore(_: str) -> None:
    pass


def _relay_progress(queue: Any, progress: Callable[[str], None]) -> None:
    """Runs in the caller: each stage a worker tells, until the ``None`` that ends the run."""
    while (stage := queue.get()) is not None:
        progress(stage)


def _start_worker(queue: Any) -> None:
    """One intra-op thread per worker (they share the CPUs); what the fork inherited is frozen, so Python's
    cyclic collector never rescans it during the traces (nor copies its pages by touching them)."""
    global _relay
    _relay = queue
    torch.set_num_threads(1)
    gc.freeze()


def _run(job: Job[T]) -> T:
    return job(_relay.put)
