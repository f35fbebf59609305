"""Checkpointing what-ifs over one traced graph, then the parallelism and allocator replay each choice gets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import networkx as nx
import torch

from vramsim.analysis.device_memory import DeviceMemory, MemoryFigures, TimelineReplay
from vramsim.analysis.placement import device_timelines
from vramsim.analysis.ranks import held_state
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing import WhatIf, what_if
from vramsim.estimators.checkpointing_plan import CheckpointPlan, budgeted_plan, parse_checkpointing
from vramsim.estimators.context_parallel import ring_buffers
from vramsim.estimators.expert_parallel import all_to_all_buffers
from vramsim.estimators.pipeline_parallel import PipelineSplit
from vramsim.estimators.sharding import Sharded, shard
from vramsim.estimators.timeline import Timeline
from vramsim.results.report import CheckpointChoice, PlacedDevice, StageMemory
from vramsim.tracer.collector import collector_paused
from vramsim.workload.parallel.device_map import DevicePlacement
from vramsim.workload.targets import Target

__all__ = ["Analysis", "Outcome", "checkpointing_choices"]


@dataclass(frozen=True, slots=True)
class Outcome:
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
    devices: list[PlacedDevice] = field(default_factory=list)
    """With a device map: every GPU; ``memory`` and ``timeline`` are the busiest one's."""


class Analysis:
    """Checkpointing what-ifs over one traced graph, then the config's pipeline stages (each,
    ``estimators/pipeline_parallel.py``) or data parallelism (one rank of it, ``estimators/sharding/shard.py``),
    each replayed on the target."""

    def __init__(
        self,
        graph: nx.MultiDiGraph,
        target: Target,
        config: SimulationConfig,
        *,
        timeline: Timeline | None = None,
        routed: tuple[int, int] | None = None,
        placement: DevicePlacement | None = None,
    ) -> None:
        """``timeline``: a derived generation's, standing for the traced one (``vramsim/analysis/generation.py``);
        ``routed``: under expert parallelism, the routed rows of an experts call and their width; ``placement``:
        an inference model's device map over the GPUs (``vramsim/workload/parallel/device_map.py``)."""
        self._graph = graph
        self._timeline = timeline
        self._routed = routed
        self._placement = placement
        self._target = target
        self._config = config
        # A checkpoint stashes the host RNG state; it is device memory only where the host is the device.
        self._rng_bytes = torch.get_rng_state().nbytes if "cpu" in target.counted_devices else 0
        self._managed = graph.graph.get("managed", frozenset())
        """Storages in CUDA managed memory (paged optimizer states): off the allocator's timeline, reported apart."""
        self._managed_bytes = sum(graph.nodes[("storage", sid)]["nbytes"] for sid in self._managed)

    def with_config(self, config: SimulationConfig) -> Analysis:
        """The same trace under other analysis options (``ANALYSIS_OPTIONS``: sharding, headroom...)."""
        return Analysis(
            self._graph, self._target, config, timeline=self._timeline, routed=self._routed, placement=self._placement
        )

    def run(self, plan: CheckpointPlan) -> Outcome:
        """``plan`` on this trace under this config's parallelism and allocator. Outcomes are kept with the
        graph: every variant of ``simulate_each`` and every advice line that asks the same reuses one.
        ``auto`` runs the plan ``budgeted_plan`` picks for this device."""
        config = self._config
        if config.compile:  # the compiled program ran its checkpointing itself (vramsim/workload/build.py)
            plan = CheckpointPlan("none")
        elif plan.kind == "auto":
            plan = self._budgeted()
        key = (
            plan.spec,
            self._target.name,  # one trace judged on several devices (``vramsim fit`` without --device)
            config.sharding,
            config.pipeline_parallel,
            config.expandable_segments,
            config.gpus,
            config.headroom,
            config.task,
            id(self._timeline),
            config.torch_empty_cache_steps,
            config.cuda_module_loading,
            config.activation_offloading,
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

    def _run(self, plan: CheckpointPlan) -> Outcome:
        with collector_paused():
            return self._analysed(plan)

    def _what_if(self, plan: CheckpointPlan) -> WhatIf:
        """``plan``'s what-if of this graph, computed once for all the variants that share it (sharding, devices,
        ranks); each gets its own copy of the blocks, which later stages may change."""
        kept = self._graph.graph.setdefault("what_ifs", {})
        offloading = self._config.activation_offloading
        key = (plan.spec, self._rng_bytes, offloading)
        if key not in kept:
            try:
                kept[key] = what_if(self._graph, plan, rng_state_bytes=self._rng_bytes, activation_offloading=offloading)
            except ValueError as exc:
                raise ConfigError(f"checkpointing={plan.spec!r}: {exc}") from None
            except NotImplementedError as exc:
                raise UnsupportedError(f"checkpointing={plan.spec!r}: {exc}") from None
        outcome: WhatIf = kept[key]
        timeline = outcome.timeline
        blocks = [block.copy() for block in timeline.blocks]
        for sid in self._managed:  # managed memory: torch's caching allocator never sees it
            blocks[sid].nbytes = 0
        copied = Timeline(
            blocks=blocks,
            events=timeline.events,
            preexisting=timeline.preexisting,
            steps=timeline.steps,
        )
        return dataclasses.replace(outcome, timeline=copied)

    def _analysed(self, plan: CheckpointPlan) -> Outcome:
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
        if self._config.pipeline_parallel.active:
            return dataclasses.replace(self._pipeline(outcome), exchange_bytes=exchange)
        if self._placement is not None:
            return self._placed(outcome, self._placement)
        sharding = self._config.sharding
        sharded = shard(self._graph, outcome.timeline, sharding) if sharding.active else None
        timeline = outcome.timeline if sharded is None else sharded.timeline
        return Outcome(outcome, self._replay(timeline), timeline, sharded, exchange_bytes=exchange)

    def replays_resized(self, plan: CheckpointPlan) -> bool:
        """Whether ``plan``'s outcome is its what-if's timeline replayed as it is, every block the bytes of a traced
        storage (one of the trace's, or a recomputed copy of one) and every event placed by the graph's clocks
        alone: so that another point of the same structure is that timeline replayed with its own storages' bytes
        (``timeline_replay``). Not where a stage reads sizes to decide: ``auto`` (which fits), activation
        offloading (its smallest offloaded tensor), sharding, pipeline stages, rings, exchanges, a device map,
        managed memory; nor under ``offload``, whose copies are a saved tensor's bytes."""
        config = self._config
        kind = "none" if config.compile else plan.kind
        return (
            kind not in ("auto", "offload")
            and not config.activation_offloading
            and not config.sharding.active
            and not config.pipeline_parallel.active
            and config.cp == 1
            and self._timeline is None
            and self._routed is None
            and self._placement is None
            and not self._managed
        )

    def timeline_replay(self, timeline: Timeline) -> TimelineReplay:
        """``timeline``'s replay on the target under this config, as data: an outcome's (``replays_resized``)
        replayed with another point's blocks' bytes (``TimelineReplay.memory``) gives the device memory that
        point's own ``run`` would."""
        config = self._config
        return TimelineReplay(
            timeline=timeline,
            profile=self._target.profile,
            training=config.task == "train",
            expandable_segments=config.expandable_segments,
            world_size=1 if self._placement is not None else config.gpus,  # a device map's copies need no NCCL
            usable_bytes=self.usable_bytes,
            empty_cache_steps=config.torch_empty_cache_steps,
            module_loading=config.cuda_module_loading,
            managed_bytes=self._managed_bytes,
        )

    @property
    def usable_bytes(self) -> int | None:
        """The capacity less the headroom, what the device figure must stay within; ``None`` for the cpu."""
        capacity = self._target.profile.memory_bytes
        return None if capacity is None else int(capacity * (1 - self._config.headroom))

    def _replay(self, timeline: Timeline) -> DeviceMemory:
        return self.timeline_replay(timeline).memory()

    def _pipeline(self, outcome: WhatIf) -> Outcome:
        """Each pipeline stage replayed, under data parallelism as one data-parallel rank of that stage's
        weights; the busiest (most device memory) is the one reported."""
        plan, sharding = self._config.pipeline_parallel, self._config.sharding
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
        return Outcome(outcome, memory, stage.timeline, sharded, rows)

    def _placed(self, outcome: WhatIf, placement: DevicePlacement) -> Outcome:
        """Each GPU of the device map replayed on its own; the busiest (most device memory) is the one reported."""
        replayed = [
            (gpu, timeline, self._replay(timeline))
            for gpu, timeline in enumerate(device_timelines(self._graph, outcome.timeline, placement))
            if timeline.blocks
        ]
        rows = [
            PlacedDevice(
                device=gpu,
                modules=[name for name, device in placement.device_map.items() if device == gpu],
                max_memory_bytes=placement.max_memory[gpu],
                parameter_bytes=sum(b.nbytes for b in timeline.blocks if b.category in ("parameters", "buffers")),
                kv_cache_bytes=memory.live.breakdown(timeline, memory.peak_index).get("kv_cache", 0),
                peak_bytes=memory.peak_bytes,
                device_bytes=memory.device_bytes,
                fits=self.fits(memory),
            )
            for gpu, timeline, memory in replayed
        ]
        _, timeline, memory = max(replayed, key=lambda item: item[2].device_bytes)
        return Outcome(outcome, memory, timeline, devices=rows)

    def fits(self, memory: DeviceMemory | MemoryFigures) -> bool | None:
        """Within the usable memory: where the unlimited replay passes it, the device figure is the replay's
        within it (the allocator gives back its cache before an OOM), so a job that runs there fits. Managed memory
        (paged optimizer states) does not count: the driver pages it out to the host rather than fail."""
        capacity = self._target.profile.memory_bytes
        if capacity is None:
            return None
        return memory.device_bytes - memory.managed_bytes <= capacity * (1 - self._config.headroom)

    def choice(self, outcome: Outcome) -> CheckpointChoice:
        return CheckpointChoice(
            checkpointing=outcome.what_if.plan.spec,
            peak_bytes=outcome.memory.peak_bytes,
            reserved_bytes=outcome.memory.reserved_bytes,
            device_bytes=outcome.memory.device_bytes,
            fits=self.fits(outcome.memory),
            cost=outcome.what_if.cost,
        )


def checkpointing_choices(target: Target) -> list[CheckpointPlan]:
    """What ``--checkpointing all`` compares (offload only where host memory is not the device's)."""
    specs = ["none", "full", "every:2", "selective", "selective:torchtitan"]
    specs += ["offload"] if target.profile.vendor != "cpu" else []
    return [parse_checkpointing(spec) for spec in specs]
