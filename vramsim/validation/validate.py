"""``validate``: the prediction beside a real run of the same workload."""

from __future__ import annotations

import os
from typing import Any

import torch

from vramsim.analysis.simulate import simulate
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.devices import match_reported_name
from vramsim.results.validation import Validation
from vramsim.validation.measure import measure_cpu, measure_cuda
from vramsim.workload.models import ModelSource, with_model_defaults

__all__ = ["HOST_MEMORY_MARGIN", "host_memory_available", "validate"]

HOST_MEMORY_MARGIN = 0.2
"""Share of the host's available memory a CPU validation leaves free: the run is refused when its
predicted peak exceeds the rest. The prediction counts the tensors c10's allocator holds; the
profiler's event buffers, Python objects and allocator fragmentation come on top."""


def validate(model: ModelSource, *, device: str = "cpu", **options: Any) -> Validation:
    """Simulate ``model`` for ``device`` and run it there for real.

    ``device="cpu"`` measures with the profiler; ``"cuda"`` (or a catalog GPU name) runs on
    ``cuda:0`` and compares ``max_memory_allocated`` and ``max_memory_reserved``.

    >>> import transformers
    >>> cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)
    >>> abs(validate(cfg, task="forward", seq_len=16).error) < 0.005
    True
    """
    options = with_model_defaults(model, options)
    if device.lower() != "cpu":
        return _validate_cuda(model, device, options)
    report = simulate(model, device="cpu", **options)
    _check_host_memory(report.peak_bytes)
    measured = measure_cpu(model, SimulationConfig.from_options(device="cpu", **options))
    return Validation(model=report.model, device="cpu", predicted_bytes=report.peak_bytes, measured_bytes=measured.peak_bytes)


def _check_host_memory(predicted: int) -> None:
    """Refuse a CPU run the host cannot hold: the kernel would kill it without a word."""
    available = host_memory_available()
    if available is None:
        return
    usable = int(available * (1 - HOST_MEMORY_MARGIN))
    if predicted > usable:
        raise ConfigError(
            f"validate would run this workload for real on this machine's CPU, needing about {_gib(predicted)} of "
            f"host memory; {_gib(available)} is available ({_gib(usable)} with a {HOST_MEMORY_MARGIN:.0%} margin): "
            "use a smaller model, --batch-size or --seq-len (vramsim trace needs no memory)"
        )


def host_memory_available() -> int | None:
    """Bytes the host can give without swapping: ``MemAvailable`` of /proc/meminfo (Linux), else None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB
    except OSError:
        pass
    if hasattr(os, "sysconf") and "SC_AVPHYS_PAGES" in os.sysconf_names:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def _gib(count: int) -> str:
    return f"{count / 2**30:.1f} GiB"


def _validate_cuda(model: ModelSource, device: str, options: dict[str, Any]) -> Validation:
    if not torch.cuda.is_available():
        raise UnsupportedError(
            f"validate --device {device} runs the workload for real and needs a CUDA GPU; none is visible here (use --device cpu)"
        )
    target = cuda_target_name() if device.lower() == "cuda" else device
    report = simulate(model, device=target, **options)
    measured = measure_cuda(model, SimulationConfig.from_options(device=target, **options))
    return Validation(
        model=report.model,
        device=target,
        predicted_bytes=report.peak_bytes,
        measured_bytes=measured.peak_bytes,
        predicted_reserved_bytes=report.reserved_bytes,
        measured_reserved_bytes=measured.reserved_bytes,
    )


def cuda_target_name() -> str:
    """The catalog entry of ``cuda:0``, from the name and memory ``torch.cuda`` reports (``match_reported_name``)."""
    reported = torch.cuda.get_device_name(0)
    profile = match_reported_name(reported, torch.cuda.get_device_properties(0).total_memory)
    if profile is None:
        raise UnsupportedError(f"{reported} is not in the catalog (vramsim gpus); pass device='NAME'")
    return profile.name
