"""The public entry points: ``simulate`` and ``count_parameters``."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx
import torch

from vramsim.analysis import generation, summary
from vramsim.analysis.device_memory import DeviceMemory, device_memory
from vramsim.analysis.ranks import held_state, model_parallel_notes, rank_memory, sharding_notes
from vramsim.analysis.settings import run_settings
from vramsim.config.simulation import SimulationConfig, options
from vramsim.errors import ConfigError, TraceError, UnsupportedError
from vramsim.estimators.assumptions import COMPILE_FUSION, COMPILE_MODELLED
from vramsim.estimators.checkpointing import CheckpointPlan, WhatIf, budgeted_plan, parse_checkpointing, what_if
from vramsim.estimators.context_parallel import ring_buffers
from vramsim.estimators.expert_parallel import all_to_all_buffers
from vramsim.estimators.pipeline import PipelineSplit
from vramsim.estimators.sharding import Sharded, shard
from vramsim.estimators.timeline import Timeline
from vramsim.results.report import Assumption, CheckpointChoice, Report, StageMemory
from vramsim.tracer.data_dependent import parse_routing
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import Trace
from vramsim.workload.attention import attention_in_force, attention_notes, attention_stand_in, check_attention
from vramsim.workload.build import build_program
from vramsim.workload.diffusion.pipelines import pipeline_notes, pipeline_options, pipeline_phases
from vramsim.workload.diffusion.training import training_notes, training_options, training_phases
from vramsim.workload.losses import check_loss_target, loss_notes, parse_loss
from vramsim.workload.models import ModelSource, build_model, load_config
from vramsim.workload.optimizers import PAGED_STATES, check_target, describe_optimizer
from vramsim.workload.parallel.expert import routed_rows
from vramsim.workload.program import Program
from vramsim.workload.quantization.weights import quantization_notes, quantized_kernels_on_meta
from vramsim.workload.targets import Target, resolve_target
from vramsim.workload.tracing import trace_program

__all__ = ["ANALYSIS_OPTIONS", "Analysis", "build_and_trace", "count_parameters", "simulate", "simulate_each"]


def simulate(model: ModelSource, **options: Any) -> Report:
    """Trace one workload on the meta device and report its steady-state peak on ``device``.

    ``options`` are keyword-only and are ``SimulationConfig``'s fields, each documented there
    (``task``, ``batch_size``, ``seq_len``, ``device``, ``dtype``, ``mixed_precision``,
    ``optimizer``, ``checkpointing``, ``gpus``, ``zero``, ``fsdp``, ``tp``, ``pp``, ``lora``, ``inputs``,
    ``loss``...); an unknown one is a ``ConfigError`` naming the choices.

    >>> report = simulate("meta-llama/Llama-3.2-1B", task="forward", seq_len=128, device="cpu")
    >>> report.peak_bytes > 0
    True
    """
    return simulate_each(model, [{}], **options)[0]


ANALYSIS_OPTIONS = frozenset(
    {
        "checkpointing",
        "gradient_checkpointing",
        "gpus",
        "zero",
        "fsdp",
        "gradient_as_bucket_view",
        "headroom",
        "expandable_segments",
        "cuda_module_loading",
        "pp",
        "pp_schedule",
        "micro_batches",
        "pp_virtual_stages",
        "offload_states",
        "shard_group_size",
        "torch_empty_cache_steps",
    }
)
"""Options computed from the graph, not traced: variants of one trace may differ in these only."""


def simulate_each(model: ModelSource, variants: list[dict[str, Any]], *, advise: bool = True, **options: Any) -> list[Report]:
    """One trace, one report per variant: each variant overrides ``ANALYSIS_OPTIONS`` (checkpointing,
    data and pipeline parallelism, headroom, expandable segments), which are what-ifs over the traced graph
    (``tp`` changes the traced program, so it is fixed across variants). ``advise=False`` leaves each
    report's ``advice`` empty: its lines are further what-ifs for every variant that does not fit, which
    a sweep reading only the figures does not need (they are most of its time).

    >>> reports = simulate_each("gpt2", [{"gpus": 8, "zero": 1}, {"gpus": 8, "fsdp": "full"}], seq_len=16, device="cpu")
    >>> reports[0].peak_bytes > reports[1].peak_bytes
    True
    """
    config = SimulationConfig.from_options(**options)
    configs = []
    for variant in variants:
        fixed = sorted(set(variant) - ANALYSIS_OPTIONS)
        if fixed:
            raise ConfigError(
                f"a variant cannot set {fixed[0]!r} (it changes the trace); a variant may set: "
                f"{', '.join(sorted(ANALYSIS_OPTIONS))}"
            )
        configs.append(SimulationConfig.from_options(**{**options, **variant}))
    target = resolve_target(config.device)
    check_attention(config.attn_implementation, target.profile)
    check_loss_target(parse_loss(config.loss) if isinstance(config.loss, str) else None, target.profile)
    for each in configs:
        _check_checkpointing(parse_checkpointing(each.checkpointing), each, target)
    check_target(config.optimizer, target.profile.vendor)
    started = time.perf_counter()
    program, specs, trace, graph, derived = _trace(model, config, target, derive=all(map(generation.derives, configs)))
    traced = time.perf_counter() - started
    reports = []
    for each in configs:
        began = time.perf_counter()
        reports.append(
            _report(
                model,
                each,
                target,
                program,
                specs,
                trace,
                graph,
                derived,
                advise=advise,
                seconds=traced + time.perf_counter() - began,
            )
        )
    return reports


def _trace(
    model: ModelSource, config: SimulationConfig, target: Target, *, derive: bool
) -> tuple[Program, list[summary.LayerSpec], Trace, nx.MultiDiGraph, generation.Generation | None]:
    """Trace the workload; with ``derive`` (a long generation, on one rank in every variant), as two short
    runs it is derived from (``vramsim/analysis/generation.py``), unless they cannot give it, and then whole."""
    if derive:
        program, specs, trace = build_and_trace(model, generation.head_config(config), target, checkpointing="marked")
        graph = build_graph(trace)
        try:
            probe_config, prepare = generation.tail_probe(config, program.batch)
            _, _, probe = build_and_trace(model, probe_config, target, checkpointing="marked", prepare=prepare)
            return program, specs, trace, graph, generation.derive(graph, build_graph(probe), config.max_new_tokens or 0)
        except (ValueError, TraceError):  # no probe, or steps unalike: the whole trace says what runs
            pass
    program, specs, trace = build_and_trace(model, config, target, checkpointing="marked")
    return program, specs, trace, build_graph(trace), None


def _report(
    model: ModelSource,
    config: SimulationConfig,
    target: Target,
    program: Program,
    specs: list[summary.LayerSpec],
    trace: Trace,
    graph: nx.MultiDiGraph,
    derived: generation.Generation | None,
    *,
    advise: bool,
    seconds: float,
) -> Report:
    """One variant's report from the shared trace."""
    plan = parse_checkpointing(config.checkpointing)
    started = time.perf_counter()
    analysis = Analysis(
        graph,
        target,
        config,
        timeline=None if derived is None else derived.timeline,
        routed=routed_rows(program.model, config) if config.ep > 1 else None,
    )
    chosen = analysis.run(CheckpointPlan("none") if plan.kind == "all" else plan)
    steady = summary.steady_peak(chosen.timeline, chosen.memory)
    memory = chosen.memory
    capacity = target.profile.memory_bytes
    return Report(
        model=_model_name(model),
        target=target.name,
        task=config.task,
        peak_bytes=memory.peak_bytes,
        reserved_bytes=memory.reserved_bytes,
        device_bytes=memory.device_bytes,
        capacity_bytes=capacity,
        fits=analysis.fits(memory),
        headroom=config.headroom,
        advice=_advice(analysis, config, target, memory) if advise and analysis.fits(memory) is False else [],
        peak_at=steady.site,
        breakdown=steady.breakdown,
        parameters=summary.count_parameters(*program.modules.values()),
        trainable_parameters=summary.count_parameters(*program.modules.values(), trainable=True)
        if config.task == "train"
        else None,
        layers=summary.layer_rows(specs, chosen.timeline, memory),
        checkpointing=[analysis.choice(analysis.run(p)) for p in _choices(target)]
        if plan.kind == "all"
        else [analysis.choice(chosen)]
        if plan.kind == "auto"
        else [],
        assumptions=[
            *(Assumption(name=o.name, detail=o.source, bytes=o.bytes) for o in memory.overheads),
            *target.notes,
            *(target.training_notes if config.task == "train" else ()),
            *attention_notes(config.attn_implementation),
            *_program_notes(config, program, target),
            *(sharding_notes(chosen.sharded) if chosen.sharded else []),
            *model_parallel_notes(config.tp, config.pipeline, config.ep, config.cp),
            *(Assumption(name="data_dependent", detail=note) for note in trace.notes),
            *([derived.note] if derived is not None else []),
        ],
        ranks=rank_memory(
            chosen.sharded,
            chosen.timeline,
            gpus=config.gpus,
            tp=config.tp,
            pipeline=config.pipeline,
            stages=chosen.stages,
            ep=config.ep,
            cp=config.cp,
            exchange_bytes=chosen.exchange_bytes,
        )
        if chosen.sharded or config.gpus > 1
        else None,
        components=summary.component_peaks(
            pipeline_phases(program) or training_phases(program), program.modules, chosen.timeline, memory
        ),
        options=_options(config, program)
        | {"attn_implementation": attention_in_force(program.modules)}
        | pipeline_options(program)
        | training_options(program),
        settings=run_settings(config, program),
        warnings=[*program.warnings, *_option_warnings(config, trace)],
        trace_seconds=round(seconds + time.perf_counter() - started, 3),
        allocator_pressure=memory.pressure,
    )


def _program_notes(config: SimulationConfig, program: Program, target: Target) -> list[Assumption]:
    """A pipeline's generation or training step says what it assumes; a single model's run, its own."""
    if pipeline_phases(program):
        return pipeline_notes(program)
    if training_phases(program):
        return training_notes(program)
    return _run_notes(config, program, target)


def build_and_trace(
    model: ModelSource,
    config: SimulationConfig,
    target: Target,
    *,
    checkpointing: Literal["marked", "applied"],
    prepare: Callable[[Program], None] | None = None,
) -> tuple[Program, list[summary.LayerSpec], Trace]:
    """Build the workload on meta and trace it for ``target``. ``simulate`` traces it with the
    checkpointable blocks marked and computes every checkpointing choice from the graph; a
    re-trace with the choice ``applied`` for real is how the tests check that computation.
    ``prepare`` changes the built program before it is traced (a generation's tail probe)."""
    with (
        target.emulation(config.torch_autograd) as emulation,
        attention_stand_in(config.attn_implementation, emulation),
        quantized_kernels_on_meta(config.quantization),
    ):
        program = build_program(
            model, config, device="meta", emulation=emulation, foreach=target.foreach, checkpointing=checkpointing
        )
        if prepare is not None:
            prepare(program)
        specs = summary.layer_specs(program.modules)
        trace = trace_program(
            program, devices=target.counted_devices, workspaces=target.rules.workspaces, moe_routing=config.moe_routing
        )
    return program, specs, trace


@dataclass(frozen=True, slots=True)
class _Outcome:
    what_if: WhatIf
    memory: DeviceMemory
    timeline: Timeline
    """The timeline replayed: the what-if's, or one rank's of it under ``sharded``'s plan."""
    sharded: Sharded | None = None
    stages: list[StageMemory] = field(default_factory=list)
    """With a pipeline: every stage; ``memory`` and ``timeline`` are the busiest one's."""
    exchange_bytes: int = 0
    """With expert parallelism: one all-to-all buffer's bytes (each exchange holds two for its moment); with context
    parallelism: the largest SDPA call's K/V ring (three chunks)."""


class Analysis:
    """Checkpointing what-ifs over one traced graph, then the config's pipeline stages (each,
    ``estimators/pipeline.py``) or data parallelism (one rank of it, ``estimators/sharding.py``),
    each replayed on the target."""

    def __init__(
        self,
        graph: nx.MultiDiGraph,
        target: Target,
        config: SimulationConfig,
        *,
        timeline: Timeline | None = None,
        routed: tuple[int, int] | None = None,
    ) -> None:
        """``timeline``: a derived generation's, standing for the traced one (``vramsim/analysis/generation.py``);
        ``routed``: under expert parallelism, the routed rows of an experts call and their width."""
        self._graph = graph
        self._timeline = timeline
        self._routed = routed
        self._target = target
        self._config = config
        # A checkpoint stashes the host RNG state; it is device memory only where the host is the device.
        self._rng_bytes = torch.get_rng_state().nbytes if "cpu" in target.counted_devices else 0

    def with_config(self, config: SimulationConfig) -> Analysis:
        """The same trace under other analysis options (``ANALYSIS_OPTIONS``: sharding, headroom...)."""
        return Analysis(self._graph, self._target, config, timeline=self._timeline, routed=self._routed)

    def run(self, plan: CheckpointPlan) -> _Outcome:
        """``plan`` on this trace under this config's parallelism and allocator. Outcomes are kept with the
        graph: every variant of ``simulate_each`` and every advice line that asks the same reuses one.
        ``auto`` runs the plan ``budgeted_plan`` picks for this device."""
        config = self._config
        if plan.kind == "auto":
            plan = self._budgeted()
        key = (
            plan.spec,
            config.sharding,
            config.pipeline,
            config.expandable_segments,
            config.gpus,
            config.headroom,
            config.task,
            id(self._timeline),
            config.torch_empty_cache_steps,
            config.cuda_module_loading,
        )
        outcomes = self._graph.graph.setdefault("analysis_outcomes", {})
        if key not in outcomes:
            outcomes[key] = self._run(plan)
        return outcomes[key]

    def _budgeted(self) -> CheckpointPlan:
        """``auto``: the least recompute whose device memory fits, each candidate one what-if of this graph."""
        capacity = self._target.profile.memory_bytes
        if capacity is None:
            raise ConfigError("checkpointing='auto' fits a device's memory; the cpu target has no size: name a GPU (--device)")
        units = self._graph.graph["units"]
        if not units:
            raise ConfigError(
                "checkpointing='auto': the traced program has no blocks to checkpoint (the model has no checkpointing call sites)"
            )

        layers = 1 + max(unit.index for unit in units)

        def measure(plan: CheckpointPlan) -> tuple[bool, int]:
            outcome = self.run(plan)
            return bool(self.fits(outcome.memory)), outcome.what_if.cost.recomputed_flops

        return budgeted_plan(layers, measure)

    def _run(self, plan: CheckpointPlan) -> _Outcome:
        with _collector_paused():
            return self._analysed(plan)

    def _what_if(self, plan: CheckpointPlan) -> WhatIf:
        """``plan``'s what-if of this graph, computed once for all the variants that share it (sharding, devices,
        ranks); each gets its own copy of the blocks, which later stages may change."""
        kept = self._graph.graph.setdefault("what_ifs", {})
        key = (plan.spec, self._rng_bytes)
        if key not in kept:
            try:
                kept[key] = what_if(self._graph, plan, rng_state_bytes=self._rng_bytes)
            except ValueError as exc:
                raise ConfigError(f"checkpointing={plan.spec!r}: {exc}") from None
            except NotImplementedError as exc:
                raise UnsupportedError(f"checkpointing={plan.spec!r}: {exc}") from None
        outcome: WhatIf = kept[key]
        timeline = outcome.timeline
        copied = Timeline(
            blocks=[block.copy() for block in timeline.blocks],
            events=timeline.events,
            preexisting=timeline.preexisting,
            steps=timeline.steps,
        )
        return dataclasses.replace(outcome, timeline=copied)

    def _analysed(self, plan: CheckpointPlan) -> _Outcome:
        outcome = self._what_if(plan)
        if self._timeline is not None:  # a generation runs no checkpointing: the what-if is the trace itself
            outcome = dataclasses.replace(outcome, timeline=self._timeline)
        exchange = 0
        if self._routed is not None:  # expert parallel: the rank's all-to-all buffers
            try:
                exchanged, exchange = all_to_all_buffers(
                    self._graph, outcome.timeline, rows=self._routed[0], hidden=self._routed[1]
                )
            except NotImplementedError as exc:
                raise UnsupportedError(str(exc)) from None
            outcome = dataclasses.replace(outcome, timeline=exchanged)
        if self._config.cp > 1:  # context parallel: each SDPA call's ring
            try:
                ringed, exchange = ring_buffers(self._graph, outcome.timeline)
            except NotImplementedError as exc:
                raise UnsupportedError(str(exc)) from None
            outcome = dataclasses.replace(outcome, timeline=ringed)
        if self._config.pipeline.active:
            return dataclasses.replace(self._pipeline(outcome), exchange_bytes=exchange)
        sharding = self._config.sharding
        sharded = shard(self._graph, outcome.timeline, sharding) if sharding.active else None
        timeline = outcome.timeline if sharded is None else sharded.timeline
        return _Outcome(outcome, self._replay(timeline), timeline, sharded, exchange_bytes=exchange)

    def _replay(self, timeline: Timeline) -> DeviceMemory:
        capacity = self._target.profile.memory_bytes
        usable = None if capacity is None else int(capacity * (1 - self._config.headroom))
        return device_memory(
            timeline,
            self._target,
            training=self._config.task == "train",
            expandable_segments=self._config.expandable_segments,
            world_size=self._config.gpus,
            usable_bytes=usable,
            empty_cache_steps=self._config.torch_empty_cache_steps,
            module_loading=self._config.cuda_module_loading,
        )

    def _pipeline(self, outcome: WhatIf) -> _Outcome:
        """Each pipeline stage replayed, under data parallelism as one data-parallel rank of that stage's
        weights; the busiest (most device memory) is the one reported."""
        plan, sharding = self._config.pipeline, self._config.sharding
        try:
            split = PipelineSplit(self._graph, outcome.timeline, plan)
        except ValueError as exc:
            raise ConfigError(f"pp={plan.stages}: {exc}") from None
        except NotImplementedError as exc:
            raise UnsupportedError(f"pp={plan.stages}: {exc}") from None
        staged = []
        for rank in range(plan.stages):
            sharded = shard(self._graph, outcome.timeline, sharding, weights=split.weights(rank)) if sharding.active else None
            replayed = [
                (stage, self._replay(stage.timeline))
                for stage in split.stages(rank, None if sharded is None else sharded.timeline)
            ]
            stage, memory = max(replayed, key=lambda item: item[1].device_bytes)  # the busiest of its backwards
            staged.append((stage, sharded, memory))
        rows = [
            StageMemory(
                rank=stage.rank,
                layers=list(stage.layers),
                held_bytes=stage.held_bytes,
                in_flight=stage.in_flight,
                model_state=held_state(stage.timeline),
                peak_bytes=memory.peak_bytes,
                device_bytes=memory.device_bytes,
                fits=self.fits(memory),
            )
            for stage, _, memory in staged
        ]
        stage, sharded, memory = max(staged, key=lambda item: item[2].device_bytes)
        return _Outcome(outcome, memory, stage.timeline, sharded, rows)

    def fits(self, memory: DeviceMemory) -> bool | None:
        """Within the usable memory, or beyond it only in cache the allocator gives back before an OOM."""
        capacity = self._target.profile.memory_bytes
        if capacity is None:
            return None
        return memory.device_bytes <= capacity * (1 - self._config.headroom) or (
            memory.pressure is not None and memory.pressure.oom_at is None
        )

    def choice(self, outcome: _Outcome) -> CheckpointChoice:
        return CheckpointChoice(
            checkpointing=outcome.what_if.plan.spec,
            peak_bytes=outcome.memory.peak_bytes,
            reserved_bytes=outcome.memory.reserved_bytes,
            device_bytes=outcome.memory.device_bytes,
            fits=self.fits(outcome.memory),
            cost=outcome.what_if.cost,
        )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """A what-if makes millions of short-lived blocks and events beside a graph of millions of objects;
    each of Python's cyclic collections rescans them all (a third of a 70B sweep's time). What a what-if makes
    holds no cycles, so reference counting frees it; the collector is paused meanwhile, then restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _advice(analysis: Analysis, config: SimulationConfig, target: Target, memory: DeviceMemory) -> list[str]:
    """What to change first, each computed from this trace's graph with what it saves on this run: the other
    checkpointing choices (training) and, over several GPUs, sharding the training state; nothing already set,
    nothing the target refuses (``_choices``), nothing that saves nothing. Changes that alter the traced
    program (weight dtype, optimizer, sizes) need another trace: ``vramsim/search/advice.py``, ``vramsim/search/fitting.py``."""
    from vramsim.views.units import format_bytes  # the report's figures, as the terminal prints them

    variants: list[tuple[str, CheckpointPlan, Analysis]] = []
    if config.task == "train" and config.checkpointing != "all":
        plan = parse_checkpointing(config.checkpointing)
        variants += [(f"--checkpointing {p.spec}", p, analysis) for p in _choices(target) if p.spec != config.checkpointing]
        if config.sharding.gpus > 1 and not config.zero and config.fsdp == "no" and not config.pipeline.active:
            for flag, change in (
                ("--zero 1", {"zero": 1}),
                ("--zero 2", {"zero": 2}),
                ("--zero 3", {"zero": 3}),
                ("--fsdp full", {"fsdp": "full"}),
            ):
                sharded = dataclasses.replace(config, **change)
                variants.append((flag, plan, analysis.with_config(sharded)))
    computed = []
    for flag, plan, each in variants:
        try:
            other = each.run(plan).memory
        except (ConfigError, UnsupportedError):  # e.g. no blocks to checkpoint in this model: not a choice here
            continue
        saved = memory.device_bytes - other.device_bytes
        if saved > 0:
            fits = " (fits)" if each.fits(other) else ""
            computed.append(
                (other.device_bytes, f"{flag}: {format_bytes(other.device_bytes)} on the device (-{format_bytes(saved)}){fits}")
            )
    return [line for _, line in sorted(computed)]


def _choices(target: Target) -> list[CheckpointPlan]:
    """What ``--checkpointing all`` compares (offload only where host memory is not the device's)."""
    specs = ["none", "full", "every:2", "selective", "selective:torchtitan"]
    specs += ["offload"] if target.profile.vendor != "cpu" else []
    return [parse_checkpointing(spec) for spec in specs]


def _check_checkpointing(plan: CheckpointPlan, config: SimulationConfig, target: Target) -> None:
    if plan.kind != "none" and config.task != "train":
        raise ConfigError(f"checkpointing={plan.spec!r} applies to training; task={config.task!r} saves no activations")
    if plan.kind == "offload" and target.profile.vendor == "cpu":
        raise ConfigError("offload moves activations to host memory, which is the cpu target's own memory; use a GPU target")


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


def _options(config: SimulationConfig, program: Program) -> dict[str, Any]:
    """The report's JSON ``options``: each field whose ``Option`` says how it is shown, and the
    optimizer implementation that ran (a name such as ``adamw`` depends on the target)."""
    shown = {spec.name: option.report(getattr(config, spec.name)) for spec, option in options() if option.report}
    if program.optimizer is not None:
        shown["optimizer_implementation"] = describe_optimizer(program.optimizer)
    return shown


def _option_warnings(config: SimulationConfig, trace: Trace) -> list[str]:
    """Options that were taken but change less than their name says on this run."""
    warnings = []
    if config.lora is not None and config.task != "train":
        warnings.append(f"LoRA with --task {config.task}: the adapters are traced unmerged (as peft runs them), not trained")
    routing = parse_routing(config.moe_routing)
    if routing.kind != "balanced" and routing.describe() not in trace.notes:
        warnings.append(f"--moe-routing {routing.spec} changed nothing: no MoE router's expert picks were read in this model")
    return warnings


def _run_notes(config: SimulationConfig, program: Any, target: Target) -> list[Assumption]:
    notes = [
        Assumption(
            name="steady_state",
            detail=f"{config.steps} steps are run; the peak reported is the last one's"
            if config.steps > 1
            else "1 step is run; the peak reported is the first step's, not a steady state",
        )
    ]
    if config.checkpointing != "none":
        notes.append(
            Assumption(
                name="checkpointing_from_graph",
                detail=f"checkpointing {config.checkpointing} is computed from one trace without checkpointing, as "
                "non-reentrant torch.utils.checkpoint runs it (inputs kept, forward replayed at the first saved-tensor "
                "read, early stop; selective keeps matmul and attention outputs, selective:torchtitan torchtitan's save list "
                "but every second matmul of a block; offload is save_on_cpu)",
            )
        )
    if config.task == "train":
        notes.append(
            Assumption(
                name="outputs_kept_through_backward",
                detail="the model's outputs (logits) are held until backward ends, as out = model(**batch); "
                "out.loss.backward() holds them",
            )
            if config.keep_outputs
            else Assumption(
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
    if isinstance(config.loss, str):
        model_config = getattr(program.model, "config", None)
        notes += loss_notes(
            parse_loss(config.loss), getattr(model_config, "vocab_size", None), getattr(model_config, "hidden_size", None)
        )
    if config.torch_empty_cache_steps is not None and target.profile.vendor != "cpu":
        notes.append(
            Assumption(
                name="torch_empty_cache_steps",
                detail=f"the HF Trainer's torch_empty_cache_steps="
                f"{config.torch_empty_cache_steps}: torch.cuda.empty_cache() after the loss, before "
                "backward, in the traced steps whose global_step (0, 1) is a multiple of it",
            )
        )
    if config.torch_autograd == "1.10":
        notes.append(
            Assumption(
                name="torch_autograd_1_10",
                detail="PyTorch 1.10's autograd: softmax and log_softmax "
                "save their input beside their output (derivatives.yaml before 1.11); other differences "
                "of that release are not modelled",
            )
        )
    if program.compiled is not None:
        notes.append(Assumption(name="compile_partitioned", detail=f"{COMPILE_MODELLED} ({program.compiled.describe()})"))
        notes.append(Assumption(name="compile_fusion", detail=COMPILE_FUSION))
    if getattr(program.optimizer, "traced_paged", False):
        notes.append(Assumption(name="paged_optimizer_states", detail=f"{PAGED_STATES}: {_paged_bytes(program):,} B here"))
    if program.scaler is not None:
        notes.append(
            Assumption(
                name="grad_scaler",
                detail="fp16 autocast trains with torch.amp.GradScaler (fp32 master weights, loss scaled by 2**16): "
                "its scale, growth tracker, found_inf and inverse scale are traced",
            )
        )
    profile = target.profile
    if config.mixed_precision == torch.bfloat16 and profile.vendor == "nvidia" and not profile.supports_bf16:
        notes.append(
            Assumption(
                name="bf16_emulated",
                detail=f"{profile.label} has no native bf16: torch.autocast "
                "runs it emulated (torch.cuda.is_bf16_supported(including_emulation=True)), with the "
                "same tensor sizes and this architecture's kernels (no flash or memory-efficient "
                "attention in bf16 before sm80)",
            )
        )
    if config.quantization is not None:
        notes += quantization_notes(
            program.model, train=config.task == "train", lora=config.lora is not None, gpu=config.device.lower() != "cpu"
        )
    weights = next((p.dtype for module in program.modules.values() for p in module.parameters()), None)
    if weights is not None and config.dtype is None:
        notes.append(Assumption(name="weight_dtype", detail=f"weights in {str(weights).removeprefix('torch.')} (no dtype given)"))
    return notes


def _paged_bytes(program: Program) -> int:
    """The bytes of a paged optimizer's states in managed memory: ``state1``/``state2`` of tensors of 1e5
    elements or more (bitsandbytes' ``get_state_buffer``)."""
    assert program.optimizer is not None
    return sum(
        state[key].nbytes
        for p, state in program.optimizer.state.items()
        if p.numel() >= 1e5
        for key in ("state1", "state2")
        if key in state
    )
