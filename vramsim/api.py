"""The public entry points: ``simulate`` and ``count_parameters``."""

from __future__ import annotations

import time
from typing import Any

import torch

from vramsim.tracer.graph import build_graph
from vramsim.tracer.liveness import liveness

from . import summary
from .build import build_workload
from .config import SimulationConfig, options
from .device_memory import device_memory
from .errors import ConfigError
from .models import ModelSource, build_model, load_config
from .report import Assumption, Report, advice_for
from .targets import resolve_target
from .tracing import trace_workload

__all__ = ["count_parameters", "simulate"]


def simulate(model: ModelSource, **options: Any) -> Report:
    """Trace one workload on the meta device and report its steady-state peak on ``device``.

    ``options`` are keyword-only and are ``SimulationConfig``'s fields, each documented there
    (``task``, ``batch_size``, ``seq_len``, ``device``, ``dtype``, ``mixed_precision``,
    ``optimizer``, ``checkpointing``, ``lora``, ``inputs``, ``loss``...); an unknown one is a
    ``ConfigError`` naming the choices.

    >>> report = simulate("meta-llama/Llama-3.2-1B", task="forward", seq_len=128, device="cpu")
    >>> report.peak_bytes > 0
    True
    """
    config = SimulationConfig.from_options(**options)
    target = resolve_target(config.device)
    if config.mixed_precision == torch.bfloat16 and not target.profile.supports_bf16:
        raise ConfigError(f"{target.profile.label} has no bf16 support (torch.autocast refuses it); use --mixed-precision fp16")
    started = time.perf_counter()
    with target.emulation() as emulation:
        work = build_workload(model, config, device="meta", emulation=emulation, foreach=target.foreach)
        specs = summary.layer_specs(work.model)
        trace = trace_workload(
            work, devices=target.counted_devices, workspaces=target.rules.workspaces, moe_routing=config.moe_routing
        )
    graph = build_graph(trace)
    live = liveness(graph)
    steady = summary.steady_peak(trace, graph, live)
    memory = device_memory(trace, target, steady.peak_bytes, training=config.task == "train",
                           expandable_segments=config.expandable_segments)  # fmt: skip
    capacity = target.profile.memory_bytes
    fits = None if capacity is None else memory.device_bytes <= capacity * (1 - config.headroom)
    return Report(
        model=_model_name(model),
        target=target.name,
        task=config.task,
        peak_bytes=memory.allocated_bytes,
        reserved_bytes=memory.reserved_bytes,
        device_bytes=memory.device_bytes,
        capacity_bytes=capacity,
        fits=fits,
        headroom=config.headroom,
        advice=advice_for(steady.breakdown) if fits is False else [],
        peak_at=steady.site,
        breakdown=steady.breakdown,
        parameters=summary.count_parameters(work.model),
        layers=summary.layer_rows(specs, trace, live),
        assumptions=[
            *(Assumption(name=o.name, detail=o.source, bytes=o.bytes) for o in memory.overheads),
            *target.notes,
            *_run_notes(config, work),
            *(Assumption(name="data_dependent", detail=note) for note in trace.notes),
        ],
        options=_options(config),
        trace_seconds=round(time.perf_counter() - started, 3),
    )


def count_parameters(model: ModelSource, *, model_class: str | None = None, trust_remote_code: bool = False) -> int:
    """Parameters of ``model`` built on the meta device, tied weights counted once.

    >>> count_parameters("meta-llama/Llama-3.1-8B")
    8030261248
    """
    source = load_config(model, trust_remote_code=trust_remote_code) if isinstance(model, str) else model
    module = build_model(source, device="meta", dtype=None, model_class=model_class, trust_remote_code=trust_remote_code)
    return summary.count_parameters(module)


def _model_name(model: ModelSource) -> str:
    if isinstance(model, str):
        return model
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "name_or_path", None) or getattr(model, "__name__", None) or type(model).__name__


def _options(config: SimulationConfig) -> dict[str, Any]:
    """The report's JSON ``options``: each field whose ``Option`` says how it is shown."""
    return {spec.name: option.report(getattr(config, spec.name)) for spec, option in options() if option.report}


def _run_notes(config: SimulationConfig, work: Any) -> list[Assumption]:
    notes = [
        Assumption(
            name="steady_state",
            detail=f"{config.steps} steps are run; the peak reported is the last one's",
        )
    ]
    if config.task == "train":
        notes.append(
            Assumption(
                name="outputs_dropped_before_backward",
                detail="the model's outputs (logits) are released once the loss is computed, as the HF Trainer does",
            )
        )
        if config.inputs is None:
            notes.append(
                Assumption(
                    name="no_cache_in_training",
                    detail="synthesised training batches pass use_cache=False where the model takes it: "
                    "a training step reads no KV cache",
                )
            )
    if work.scaler is not None:
        notes.append(
            Assumption(
                name="grad_scaler",
                detail="fp16 autocast trains with torch.amp.GradScaler (fp32 master weights, loss scaled by 2**16): "
                "its scale, growth tracker, found_inf and inverse scale are traced",
            )
        )
    weights = next((p.dtype for p in work.model.parameters()), None)
    if weights is not None and config.dtype is None:
        notes.append(Assumption(name="weight_dtype", detail=f"weights in {str(weights).removeprefix('torch.')} (no dtype given)"))
    return notes
