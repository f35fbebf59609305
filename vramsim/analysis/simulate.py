"""One trace, then a report per variant: the engine behind ``vramsim.simulate`` and ``simulate_each``."""

from __future__ import annotations

import time
from typing import Any

from vramsim import model_zoo
from vramsim.analysis import generation, summary
from vramsim.analysis.advice import graph_advice
from vramsim.analysis.memory_history import memory_history
from vramsim.analysis.notes import option_warnings, report_options, run_notes
from vramsim.analysis.placement import placement_note
from vramsim.analysis.ranks import model_parallel_notes, rank_memory, sharding_notes
from vramsim.analysis.settings import run_settings
from vramsim.analysis.timeline import memory_timeline
from vramsim.analysis.traced import Traced, trace_workload
from vramsim.analysis.whatifs import Analysis, Outcome, checkpointing_choices
from vramsim.config import ANALYSIS_OPTIONS, SimulationConfig
from vramsim.config.choices import parse_loss
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing_plan import CheckpointPlan, parse_checkpointing
from vramsim.results.report import Assumption, CheckpointChoice, Report
from vramsim.workload.attention import attention_in_force, attention_notes, check_attention
from vramsim.workload.losses import check_loss_target
from vramsim.workload.models import ModelSource, build_model, load_config, model_name
from vramsim.workload.optimizers import check_target
from vramsim.workload.parallel.device_map import DevicePlacement, device_placement
from vramsim.workload.parallel.expert import routed_rows
from vramsim.workload.program import Program
from vramsim.workload.targets import Target, resolve_target

__all__ = ["count_parameters", "simulate", "simulate_each", "traced_report"]


def simulate(model: ModelSource, **options: Any) -> Report:
    """One workload's report with the advice its own graph gives (``vramsim.simulate`` documents the options)."""
    return simulate_each(model, [{}], **options)[0]


def simulate_each(model: ModelSource, variants: list[dict[str, Any]], *, advise: bool = True, **options: Any) -> list[Report]:
    """One trace, one report per variant (``vramsim.simulate_each`` documents it); ``advise=False`` leaves
    out the advice, the what-ifs a job that does not fit gets from its graph."""
    config = SimulationConfig.from_options(**options)
    configs = [SimulationConfig.from_options(**{**options, **_analysis_variant(variant)}) for variant in variants]
    if config.compile and any(each.checkpointing != config.checkpointing for each in configs):
        raise ConfigError("a compiled trace runs its checkpointing for real: a variant cannot change checkpointing")
    target = resolve_target(config.device)
    check_attention(config.attn_implementation, target.profile)
    check_loss_target(parse_loss(config.loss) if isinstance(config.loss, str) else None, target.profile)
    check_target(config.optimizer, target.profile.vendor)
    started = time.perf_counter()
    traced = trace_workload(model, config, target, derive=all(map(generation.derives, configs)))
    seconds = time.perf_counter() - started
    return [_report(model, each, target, traced, advise=advise, seconds=seconds) for each in configs]


def traced_report(model: ModelSource, traced: Traced, **options: Any) -> Report:
    """``simulate``'s report of a workload already traced as ``options`` trace it (``traced``): the report a
    search gives of the program it traced itself, with no second trace."""
    config = SimulationConfig.from_options(**options)
    return _report(model, config, resolve_target(config.device), traced, advise=True, seconds=0.0)


def _analysis_variant(variant: dict[str, Any]) -> dict[str, Any]:
    """A variant may change only what the graph answers without another trace."""
    fixed = sorted(set(variant) - ANALYSIS_OPTIONS)
    if fixed:
        raise ConfigError(
            f"a variant cannot set {fixed[0]!r} (it changes the trace); a variant may set: {', '.join(sorted(ANALYSIS_OPTIONS))}"
        )
    return variant


def _report(
    model: ModelSource, config: SimulationConfig, target: Target, traced: Traced, *, advise: bool, seconds: float
) -> Report:
    """One variant's report from the shared trace."""
    program = traced.program
    plan = parse_checkpointing(config.checkpointing)
    started = time.perf_counter()
    placement = _placement(program, config, target)
    analysis = Analysis(
        traced.graph,
        target,
        config,
        timeline=None if traced.derived is None else traced.derived.timeline,
        routed=routed_rows(program.model, config) if config.ep > 1 else None,
        placement=placement,
    )
    chosen = analysis.run(CheckpointPlan("none") if plan.kind == "all" else plan)
    steady = summary.steady_peak(chosen.timeline, chosen.memory)
    memory = chosen.memory
    fits = analysis.fits(memory)
    return Report(
        model=model_name(model),
        config_of=model_zoo.config_of(model) if isinstance(model, str) else None,
        target=target.name,
        task=config.task,
        peak_bytes=memory.peak_bytes,
        reserved_bytes=memory.reserved_bytes,
        device_bytes=memory.device_bytes,
        capacity_bytes=target.profile.memory_bytes,
        fits=fits,
        paged_bytes=memory.managed_bytes,
        headroom=config.headroom,
        advice=graph_advice(analysis, config, target, memory) if advise and fits is False else [],
        peak_at=steady.site,
        breakdown=steady.breakdown,
        parameters=summary.count_parameters(*program.modules.values()),
        model_parameters=_whole_model_parameters(model, config),
        trainable_parameters=summary.count_parameters(*program.modules.values(), trainable=True)
        if config.task == "train"
        else None,
        layers=summary.layer_rows(traced.specs, chosen.timeline, memory),
        checkpointing=_checkpointing_rows(analysis, plan, chosen, target),
        assumptions=_assumptions(config, target, traced, chosen)
        + ([placement_note(str(config.device_map), placement)] if placement else []),
        ranks=rank_memory(
            chosen.sharded,
            chosen.timeline,
            gpus=config.gpus,
            tp=config.tp,
            pipeline=config.pipeline_parallel,
            stages=chosen.stages,
            ep=config.ep,
            cp=config.cp,
            exchange_bytes=chosen.exchange_bytes,
            devices=chosen.devices,
            device_map=config.device_map,
        )
        if chosen.sharded or config.gpus > 1
        else None,
        components=summary.component_peaks(program.phases, program.modules, chosen.timeline, memory),
        options=report_options(config, program) | {"attn_implementation": attention_in_force(program.modules)} | program.options,
        settings=run_settings(config, program),
        warnings=[*config.warnings, *program.warnings, *option_warnings(config, traced.trace)],
        trace_seconds=round(seconds + time.perf_counter() - started, 3),
        allocator_pressure=memory.pressure,
        timeline=memory_timeline(
            traced.graph,
            chosen.timeline,
            memory,
            component_phases=program.phases,
            usable_bytes=analysis.usable_bytes,
            capacity_bytes=target.profile.memory_bytes,
        ),
        memory_history=memory_history(
            traced.graph,
            traced.trace.ops,
            chosen.timeline,
            memory,
            target,
            expandable_segments=config.expandable_segments,
            empty_cache_steps=config.torch_empty_cache_steps,
        )
        if config.memory_history
        else None,
    )


def _placement(program: Program, config: SimulationConfig, target: Target) -> DevicePlacement | None:
    """The device map of ``config.device_map`` for the traced model, or None without one."""
    if config.device_map is None:
        return None
    if list(program.modules) != [""]:
        raise UnsupportedError(f"device_map over a diffusion pipeline ({program.name}) is not modelled; give one model")
    if config.quantization is not None:
        raise UnsupportedError("device_map with quantization is not modelled yet (the quantizer changes max_memory)")
    return device_placement(program.model, config.device_map, config.gpus, config.max_memory, target)  # type: ignore[arg-type]


def _whole_model_parameters(model: ModelSource, config: SimulationConfig) -> int | None:
    """The unsharded model's count where one rank builds a shard of it (tensor or expert parallel)."""
    if config.tp == 1 and config.ep == 1:
        return None
    return count_parameters(model, model_class=config.model_class, trust_remote_code=config.trust_remote_code)


def _checkpointing_rows(analysis: Analysis, plan: CheckpointPlan, chosen: Outcome, target: Target) -> list[CheckpointChoice]:
    """``all``: every choice's row from this trace; ``auto``: the plan it chose; else none."""
    if plan.kind == "all":
        return [analysis.choice(analysis.run(p)) for p in checkpointing_choices(target)]
    return [analysis.choice(chosen)] if plan.kind == "auto" else []


def _assumptions(config: SimulationConfig, target: Target, traced: Traced, chosen: Outcome) -> list[Assumption]:
    """What the figures assume: overheads, the target's rules, the program's own notes, the parallel layout."""
    return [
        *(Assumption(name=o.name, detail=o.source, bytes=o.bytes) for o in chosen.memory.overheads),
        *target.notes,
        *(target.training_notes if config.task == "train" else ()),
        *attention_notes(config.attn_implementation),
        *(traced.program.notes or run_notes(config, traced.program, target)),
        *(sharding_notes(chosen.sharded) if chosen.sharded else []),
        *model_parallel_notes(config.tp, config.pipeline_parallel, config.ep, config.cp),
        *(Assumption(name="data_dependent", detail=note) for note in traced.trace.notes),
        *([traced.derived.note] if traced.derived is not None else []),
    ]


def count_parameters(model: ModelSource, *, model_class: str | None = None, trust_remote_code: bool = False) -> int:
    """Parameters of ``model`` built on the meta device, tied weights counted once.

    >>> count_parameters("meta-llama/Llama-3.1-8B")
    8030261248
    """
    source = load_config(model, trust_remote_code=trust_remote_code) if isinstance(model, str) else model
    module = build_model(source, device="meta", dtype=None, model_class=model_class, trust_remote_code=trust_remote_code)
    return summary.count_parameters(module)
