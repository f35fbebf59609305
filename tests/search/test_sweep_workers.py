"""Where a sweep's traces run: a worker that dies is retried once, then reported; Ray gives the local answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import transformers

import vramsim
from vramsim.search.sweep_workers import Failed, TraceTask, run_traces
from vramsim.tracer.records import Trace


def _dies_once(task: TraceTask) -> Trace | Failed:
    """Kills its worker process the first time (leaving a mark), answers the second."""
    mark = Path(task.options["mark"])
    if not mark.exists():
        mark.touch()
        os._exit(1)
    return Failed("answered on the retry")


def _always_dies(task: TraceTask) -> Trace | Failed:
    if task.options.get("die"):
        os._exit(1)
    return Failed("answered")


def test_a_dead_worker_is_retried_once(tmp_path: Path) -> None:
    """Local workers: a task whose process dies runs once more; one that dies again is reported, the others answer."""
    once = run_traces([TraceTask("m", {"mark": str(tmp_path / "mark")})], jobs=2, work=_dies_once)
    assert once == [Failed("answered on the retry")]
    tasks = [TraceTask("m", {"die": True}), TraceTask("m", {}), TraceTask("m", {})]
    assert run_traces(tasks, jobs=2, work=_always_dies) == [
        Failed("its worker process died twice (retried once)"),
        Failed("answered"),
        Failed("answered"),
    ]


def test_ray_gives_the_local_table(tiny_llama: transformers.LlamaConfig) -> None:
    """On a local Ray started here, the sweep's points are the local backend's, and a dying task is reported."""
    import ray  # the test extra's, so that this runs wherever the suite does

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        axes = {"batch_size": "1,2", "seq_len": "16,32", "device": "h100"}
        on_ray = vramsim.sweep(tiny_llama, backend="ray", **axes)
        local = vramsim.sweep(tiny_llama, jobs=1, **axes)
        assert on_ray.points == local.points and on_ray.largest == local.largest
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import a test module
        dead = run_traces([TraceTask("m", {"die": True})], backend="ray", work=_always_dies)
        assert isinstance(dead[0], Failed) and "died twice" in dead[0].reason
    finally:
        ray.shutdown()
