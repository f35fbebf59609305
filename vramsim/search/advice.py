"""Advice that needs another trace: options that change the traced program, each re-traced.

``simulate`` computes from its one trace what checkpointing and sharding would save
(``analysis/advice.py``). Weights in another dtype, bf16 autocast or another optimizer change the program itself, so
each is simulated anew and offered only when it saves device memory on this run; an option
already set, or one the target refuses (bf16 without bf16 support, bitsandbytes off NVIDIA),
is never offered. The largest batch size and sequence length that fit are searched by tracing too.

Those traces are independent of each other: each re-traced option and each size search runs in a worker
process (``search/workers.py``), so the advice takes as long as its longest job, not all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from vramsim.analysis.simulate import simulate
from vramsim.config import SimulationConfig
from vramsim.results.advice import Advice
from vramsim.results.fit import LargestFit
from vramsim.results.report import Report
from vramsim.search.fitting import largest_fit
from vramsim.search.workers import run_jobs
from vramsim.workload.models import ModelSource
from vramsim.workload.targets import resolve_target

__all__ = ["retraced_advice", "retraced_options", "traced_advice"]

_HEAVY_OPTIMIZERS = ("adamw", "adamw-foreach", "adam")
"""Optimizers keeping two full-precision states per parameter: a lighter one is worth a trace."""


def retraced_options(report: Report, options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The flag -> option changes worth a trace for this run: not already set, accepted by the target."""
    config = SimulationConfig.from_options(**options)
    profile = resolve_target(config.device).profile
    changes: dict[str, dict[str, Any]] = {}
    if report.settings.get("weights", "").startswith("float32") and not report.components:
        if profile.supports_bf16:
            changes["--dtype bf16"] = {"dtype": "bf16"}
        elif config.task != "train":  # fp16 weights cannot train under a GradScaler; inference runs them
            changes["--dtype fp16"] = {"dtype": "fp16"}
    if config.task == "train" and config.mixed_precision is None and profile.supports_bf16 and not config.compile:
        changes["--mixed-precision bf16"] = {"mixed_precision": "bf16"}  # autocast: bf16 activations, fp32 master weights
    if config.task == "train" and config.optimizer in _HEAVY_OPTIMIZERS:
        for lighter in ("adafactor", "adamw8bit") if profile.vendor == "nvidia" else ("adafactor",):  # bitsandbytes: CUDA
            changes[f"--optimizer {lighter}"] = {"optimizer": lighter}
    return changes


def retraced_advice(
    model: ModelSource,
    report: Report,
    options: dict[str, Any],
    *,
    progress: Callable[[str], None] | None = None,
    workers: int | None = 1,
) -> list[Advice]:
    """Each of ``retraced_options`` simulated with the rest of ``options``: what it saves on this run (``workers``
    as ``traced_advice`` takes it; one: here, one after the other)."""
    changes = list(retraced_options(report, options).items())
    jobs = [functools.partial(_retrace, model, options, flag, change) for flag, change in changes]
    return _saving(report, changes, run_jobs(jobs, progress=progress, workers=workers))


def traced_advice(
    model: ModelSource,
    report: Report,
    options: dict[str, Any],
    *,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> list[Advice]:
    """Everything that needs another trace, in the order it is offered: another dtype or optimizer, then sizes.
    Each re-traced option and each size search is one job of ``run_jobs``, up to ``workers`` of them at once
    (default: one per CPU), so the wait is the longest job's: a size search's traces follow one another."""
    changes = list(retraced_options(report, options).items())
    sizes = _searched(report, options)
    jobs: list[Callable[[Callable[[str], None]], Any]] = [
        *(functools.partial(_retrace, model, options, flag, change) for flag, change in changes),
        *(functools.partial(_search, model, report, options, size) for size in sizes),
    ]
    done = run_jobs(jobs, progress=progress, workers=workers)
    return [*_saving(report, changes, done[: len(changes)]), *_sized(report, done[len(changes) :])]


def _retrace(
    model: ModelSource, options: dict[str, Any], flag: str, change: dict[str, Any], progress: Callable[[str], None]
) -> tuple[int, bool | None]:
    """One re-traced option's device memory and verdict (a job: it may run in a worker process)."""
    progress(f"tracing with {flag}")
    other = simulate(model, **{**options, **change})
    return other.device_bytes, other.fits


def _saving(report: Report, changes: list[tuple[str, dict[str, Any]]], traced: list[tuple[int, bool | None]]) -> list[Advice]:
    return [
        Advice(changes=change, device_bytes=device_bytes, saved_bytes=report.device_bytes - device_bytes, fits=fits, traced=True)
        for (_, change), (device_bytes, fits) in zip(changes, traced, strict=True)
        if report.device_bytes - device_bytes > 0
    ]


def _searched(report: Report, options: dict[str, Any]) -> tuple[str, ...]:
    """The sizes searched: none for a generation, a pipeline or a table of checkpointing choices, whose sizes
    are not what a user changes first."""
    if report.task == "generate" or report.components or options.get("checkpointing") == "all":
        return ()
    return ("batch_size", "seq_len")


def _search(
    model: ModelSource, report: Report, options: dict[str, Any], size: str, progress: Callable[[str], None]
) -> LargestFit:
    """One size's search, the other held as given (a job: it may run in a worker process)."""
    return largest_fit(model, sizes=(size,), traced=report, progress=progress, cache=False, **options)


def _sized(report: Report, fits: list[LargestFit]) -> list[Advice]:
    found = []
    for fit in fits:
        largest, held = (fit.batch_size, "seq_len") if fit.batch_size is not None else (fit.seq_len, "batch_size")
        if largest is None:
            continue
        device_bytes = largest.device_bytes if largest.value is not None else largest.over_bytes
        found.append(
            Advice(
                changes={} if largest.value is None else {largest.option: largest.value},
                device_bytes=device_bytes or 0,
                saved_bytes=report.device_bytes - (device_bytes or 0),
                fits=largest.value is not None,
                traced=True,
                largest=largest,
                held={held: fit.given[held]},
            )
        )
    return found
