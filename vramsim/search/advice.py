"""Advice that needs another trace: options that change the traced program, each re-traced.

``simulate`` computes from its one trace what checkpointing and sharding would save
(``analysis/advice.py``). Weights in another dtype, bf16 autocast or another optimizer change the program itself, so
each is simulated anew and offered only when it saves device memory on this run; an option
already set, or one the target refuses (bf16 without bf16 support, bitsandbytes off NVIDIA),
is never offered. The largest batch size and sequence length that fit are searched by tracing too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vramsim.analysis.simulate import simulate
from vramsim.config import SimulationConfig
from vramsim.results.advice import Advice
from vramsim.results.report import Report
from vramsim.search.fitting import largest_fit
from vramsim.workload.models import ModelSource
from vramsim.workload.targets import resolve_target

__all__ = ["retraced_advice", "retraced_options", "size_advice", "traced_advice"]

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
    model: ModelSource, report: Report, options: dict[str, Any], *, progress: Callable[[str], None] | None = None
) -> list[Advice]:
    """Each of ``retraced_options`` simulated with the rest of ``options``: what it saves on this run."""
    found = []
    for flag, change in retraced_options(report, options).items():
        if progress is not None:
            progress(f"tracing with {flag}")
        other = simulate(model, **{**options, **change})
        saved = report.device_bytes - other.device_bytes
        if saved > 0:
            found.append(Advice(changes=change, device_bytes=other.device_bytes, saved_bytes=saved, fits=other.fits, traced=True))
    return found


def size_advice(
    model: ModelSource, report: Report, options: dict[str, Any], *, progress: Callable[[str], None] | None = None
) -> list[Advice]:
    """The largest batch size and sequence length that fit, each searched by tracing (none for a generation, a
    pipeline or a table of checkpointing choices, whose sizes are not what a user changes first)."""
    if report.task == "generate" or report.components or options.get("checkpointing") == "all":
        return []
    fit = largest_fit(model, traced=report, progress=progress, cache=False, **options)  # simulate keeps the whole answer
    found = []
    for largest, held in ((fit.batch_size, "seq_len"), (fit.seq_len, "batch_size")):
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


def traced_advice(
    model: ModelSource, report: Report, options: dict[str, Any], *, progress: Callable[[str], None] | None = None
) -> list[Advice]:
    """Everything that needs another trace, in the order it is offered: another dtype or optimizer, then sizes."""
    return [*retraced_advice(model, report, options, progress=progress), *size_advice(model, report, options, progress=progress)]
