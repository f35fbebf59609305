"""Advice that needs another trace: options that change the traced program, each re-traced.

``simulate`` computes from its one trace what checkpointing and sharding would save
(``analysis/advice.py``). Weights in another dtype or another optimizer change the program itself, so
each is simulated anew and offered only when it saves device memory on this run; an option
already set, or one the target refuses (bf16 without bf16 support, bitsandbytes off NVIDIA),
is never offered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vramsim.analysis.simulate import simulate
from vramsim.config import SimulationConfig
from vramsim.results.report import Report
from vramsim.workload.models import ModelSource
from vramsim.workload.targets import resolve_target

__all__ = ["retraced_advice", "retraced_options"]

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
    if config.task == "train" and config.optimizer in _HEAVY_OPTIMIZERS:
        for lighter in ("adafactor", "adamw8bit") if profile.vendor == "nvidia" else ("adafactor",):  # bitsandbytes: CUDA
            changes[f"--optimizer {lighter}"] = {"optimizer": lighter}
    return changes


def retraced_advice(
    model: ModelSource, report: Report, options: dict[str, Any], *, progress: Callable[[str], None] | None = None
) -> list[str]:
    """Each of ``retraced_options`` simulated with the rest of ``options``: what it saves on this run."""
    from vramsim.views.units import format_bytes  # the report's figures, as the terminal prints them

    lines = []
    for flag, change in retraced_options(report, options).items():
        if progress is not None:
            progress(f"tracing with {flag}")
        other = simulate(model, **{**options, **change})
        saved = report.device_bytes - other.device_bytes
        if saved > 0:
            fits = " (fits)" if other.fits else ""
            lines.append(f"{flag} (traced): {format_bytes(other.device_bytes)} on the device (-{format_bytes(saved)}){fits}")
    return lines
