"""The cheapest parallel setting that fits, every candidate a what-if over as few traces as the layouts need.

One trace answers every data-parallel scheme (DDP, ZeRO-1/2/3, FSDP2), every pipeline split and schedule
and every checkpointing choice over any number of ranks: each is an analysis of the traced graph, never a
re-run of the model. A tensor-, context- or expert-parallel rank runs another program (a decoder with
1/tp of the heads, 1/cp of the tokens, 1/ep of the experts), so each such degree is one more trace, made
when a candidate first needs it and shared by all its candidates (``StrategySearch.traces``), and, through
``SharedTraces``, by the same job's searches on other GPUs that differ from this one only in their memory (a
plan's offers).

Candidates (``vramsim/search/strategy_space.py``) are ordered by what they cost beyond memory: the fewest GPUs,
then the least compute lost per step (recomputed FLOPs as a share of the step's, measured on the one-rank
trace for the uniform choices and on the candidate's own for ``auto``, plus the pipeline's bubble,
``assumptions.PIPELINE_BUBBLE``), then the fewest recomputed ops, then the fewest bytes each rank sends per
micro-batch (``estimators/communication.py``), then the least device memory. The search measures them in
that order, GPU count by GPU count, and stops at the first count where one fits; ``auto`` is measured only
where it can cost no more than the cheapest fit measured so far (``StrategySearcher._auto_may_win``). No
checkpointing choice is taken to hold the least memory (``full`` can read above ``none`` on a few layers, by
its recompute's temporaries and the allocator's rounding): each is ruled out by its own bound or measured.
Every ``auto`` waits until the uniform choices have found their cheapest fit, then is weighed against it (a
few what-ifs, where measuring it takes about 4 log2 L). On a tie the uniform choice wins, so the answer does
not depend on the order measured. Before that, a lower bound read off the one-rank trace
(``vramsim/search/bounds.py``) rules out every setting whose rank must hold more than the usable memory,
without tracing its layout: most GPU counts below the answer cost no trace at all.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import networkx as nx
import torch

from vramsim.analysis.simulate import traced_report
from vramsim.analysis.summary import LayerSpec
from vramsim.analysis.traced import Traced, build_and_trace
from vramsim.analysis.whatifs import Analysis
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing import CheckpointCost, what_if
from vramsim.estimators.checkpointing_plan import CheckpointPlan, first_layers, parse_checkpointing
from vramsim.estimators.communication import communication_bytes, pipeline_bubble
from vramsim.estimators.devices import DeviceProfile
from vramsim.estimators.sharding.plan import ZeroSettings
from vramsim.results.report import Report
from vramsim.results.strategy import SCHEMES, Candidate, Refusal, RuledOut, Setting, StrategySearch
from vramsim.search.bounds import FloorBound, TracedBound
from vramsim.search.recompute_floor import RecomputeFloor, step_ops
from vramsim.search.strategy_space import CHECKPOINTING_BY_RECOMPUTE, layer_shape, settings
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import Trace
from vramsim.workload.attention import check_attention
from vramsim.workload.models import ModelSource, model_name, with_model_defaults
from vramsim.workload.optimizers import check_target
from vramsim.workload.parallel.expert import routed_rows
from vramsim.workload.program import Program
from vramsim.workload.targets import Target, resolve_target

__all__ = ["SharedTraces", "StrategySearcher", "cheapest_strategy", "cheapest_strategy_reported", "strategy_searcher"]

_Entry = tuple[tuple[float, ...], int, Setting, Candidate | None]
"""A setting in line: its cost key (a lower bound until measured), a tie-break, and its candidate once measured."""

_CHOSEN = frozenset({"gpus", "checkpointing", "gradient_checkpointing", "tp", "pp", "cp", "ep", "zero", "fsdp", "pp_schedule"})
"""Options the search sets itself (``_check`` refuses the ones a user may not fix)."""


def cheapest_strategy(
    model: ModelSource,
    *,
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> StrategySearch:
    """The cheapest setting on 1, 2, 4, ... up to ``gpus`` GPUs that fits, from as few traces as it needs; ``cache``
    as ``simulate`` takes it: the same search again is answered from the result cache.

    >>> search = cheapest_strategy("meta-llama/Llama-3.2-1B", gpus=8, seq_len=2048, mixed_precision="bf16", device="rtx-4090")
    >>> search.cheapest.gpus, search.cheapest.tp, search.cheapest.checkpointing
    (2, 2, 'none')
    """
    options = with_model_defaults(model, options)
    return cached_answer(
        cache,
        StrategySearch,
        lambda: request_key("cheapest_strategy", model, options),
        lambda: _searched(model, progress, options),
    )


def cheapest_strategy_reported(
    model: ModelSource,
    *,
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> tuple[StrategySearch, Report | None]:
    """``cheapest_strategy``'s answer and ``simulate``'s report of its cheapest setting with ``options`` (as
    ``largest_fit`` takes them under it), made from the search's own trace of that program, not a second one;
    None when the answer came from the result cache, nothing fits, or ``memory_history`` asks for the records."""
    options = with_model_defaults(model, options)
    kept: list[Report] = []
    search = cached_answer(
        cache,
        StrategySearch,
        lambda: request_key("cheapest_strategy", model, options),
        lambda: _searched(model, progress, options, kept),
    )
    return search, next(iter(kept), None)


def _searched(
    model: ModelSource,
    progress: Callable[[str], None] | None,
    options: dict[str, Any],
    kept: list[Report] | None = None,
) -> StrategySearch:
    """``cheapest_strategy``'s answer, searched; with ``kept``, the cheapest setting's report is put there
    (``cheapest_strategy_reported``)."""
    started = time.perf_counter()
    search = strategy_searcher(model, progress=progress, **options)
    config = search.config
    counts = sorted({*(1 << i for i in range(config.gpus.bit_length()) if 1 << i <= config.gpus), config.gpus})
    cheapest = None
    for gpus in counts:
        cheapest = search.cheapest(gpus)
        if cheapest is not None:
            break
    found = StrategySearch(
        model=search.model_name,
        target=search.target.name,
        usable_bytes=search.usable,
        max_gpus=config.gpus,
        candidates=sorted(search.measured.values(), key=lambda c: (*c.key, c.checkpointing == "auto")),
        cheapest=cheapest,
        traces=sum(traced is not None for traced in search.traces.values()),
        skipped=search.skipped,
        ruled_out=list(search.ruled_out.values()),
        refused=list(dict.fromkeys(search.refused)),
        trace_seconds=round(time.perf_counter() - started, 3),
    )
    if kept is not None and cheapest is not None and not config.memory_history:
        kept.append(search.report(cheapest, options | cheapest.options()))
    return found


def strategy_searcher(
    model: ModelSource,
    *,
    progress: Callable[[str], None] | None = None,
    shared: SharedTraces | None = None,
    **options: Any,
) -> StrategySearcher:
    """A search over ``model``'s settings with ``options`` on their device, its one-rank trace made: ask it for the
    cheapest setting on each GPU count (``StrategySearcher.cheapest``), every count sharing its traces, and with
    ``shared`` the searches of the same job on other GPUs too."""
    config = SimulationConfig.from_options(**options)
    _check(config)
    base = {k: v for k, v in options.items() if k not in _CHOSEN}
    return StrategySearcher(model, base, resolve_target(config.device), config, progress, shared)


def _check(config: SimulationConfig) -> None:
    if config.task != "train":
        raise UnsupportedError(f"the strategy search shards a training step; task='{config.task}' has none")
    if config.activation_offloading:
        raise UnsupportedError("the strategy search with activation_offloading is not modelled yet; trace one setting")
    if (
        config.tp > 1
        or config.pp > 1
        or config.ep > 1
        or config.cp > 1
        or config.zero
        or config.fsdp != "no"
        or config.offload_states != "none"
    ):
        raise ConfigError(
            "the strategy search chooses the layout, scheme and checkpointing itself: give gpus (the most "
            "GPUs), not tp, pp, ep, cp, zero, fsdp or offload_states"
        )
    if config.device.lower() == "cpu":
        raise ConfigError("the strategy search judges a GPU's memory; the cpu target has no fixed size (choose a device)")


class SharedTraces:
    """The rank programs traced by one job's searches on several GPUs (the same model and options, the device
    aside), by what a trace reads of the GPU (``Target.traced_alike``) and the program's degrees: a search takes
    another's trace of its program where the two GPUs differ only in their names and memory. The candidates are
    still measured on each GPU (its allocator, overheads and usable memory); a refused program is not shared (its
    refusal names the GPU)."""

    def __init__(self) -> None:
        self.traces: dict[tuple[DeviceProfile, tuple[int, int, int]], _Traced] = {}
        self._base: dict[str, Any] | None = None

    def __len__(self) -> int:
        """The programs traced."""
        return len(self.traces)

    def joined(self, base: dict[str, Any]) -> None:
        """A search of ``base`` (its options but the layout) joins: every search sharing them runs one job."""
        job = {k: v for k, v in base.items() if k != "device"}
        assert self._base is None or self._base == job, "searches share traces of one job only"
        self._base = job


@dataclass(slots=True)
class _Traced:
    """One traced program and what its candidates share."""

    graph: nx.MultiDiGraph
    program: Program
    """The program after its run, and ``specs`` and ``notes``, what a report reads beside the graph (the records
    are not kept: the graph holds them): a meta model, small beside the graph."""
    specs: list[LayerSpec]
    notes: list[str]
    routed: tuple[int, int] | None
    step_flops: int
    step_ops: int
    costs: dict[str, CheckpointCost] = field(default_factory=dict)
    """What each checkpointing plan recomputes on this program, by its spec."""


class StrategySearcher:
    """The traces made so far and the candidates measured, for one model and its options on one device."""

    def __init__(
        self,
        model: ModelSource,
        base: dict[str, Any],
        target: Target,
        config: SimulationConfig,
        progress: Callable[[str], None] | None,
        shared: SharedTraces | None = None,
    ) -> None:
        self.model, self.base, self.target, self.config, self.progress = model, base, target, config, progress
        self.shared, self.alike = shared, target.traced_alike
        if shared is not None:
            shared.joined(base)
        check_attention(config.attn_implementation, target.profile)
        check_target(config.optimizer, target.profile.vendor)
        capacity = target.profile.memory_bytes
        assert capacity is not None, "a GPU target has a capacity"
        self.usable = int(capacity * (1 - config.headroom))
        self.traces: dict[tuple[int, int, int], _Traced | None] = {}
        self.measured: dict[Setting, Candidate] = {}
        self.skipped = 0
        self.ruled_out: dict[Setting, RuledOut] = {}
        self.pending: set[tuple[int, int, int]] = set()
        """The rank programs the settings still weighed on this GPU count may need."""
        self.referenced: set[tuple[int, int, int]] = set()
        """The rank programs made references so far (or refused)."""
        self.references: list[TracedBound] = []
        """Traced programs whose moments bound the settings they cover (``TracedBound``): the one-rank program once a
        setting passes ``FloorBound``, then each tensor-parallel degree's program (no context parallelism), widest
        first, while settings of that degree pass (four what-ifs each, so not every trace: the context-parallel
        layouts are bounded by their degree's program)."""
        self.refused: list[Refusal] = []
        self.floors: dict[tuple[int, int, int], RecomputeFloor | None] = {}
        """Each reference's floor of a recompute share on the layouts its context parallelism divides."""
        self.model_name = model_name(model)
        if progress is not None and not self._reused((1, 1, 1)):
            progress(f"tracing {self.model_name} on one GPU (trace 1), for every data-parallel setting and the bound")
        program = self._trace((1, 1, 1))
        self.shape, self.source = layer_shape(program.model, config)
        one = self.traces[1, 1, 1]
        assert one is not None
        autocast = config.mixed_precision
        self.bound = FloorBound.of(
            one.graph,
            target,
            module_loading=config.cuda_module_loading,
            autocast_itemsize=autocast.itemsize if isinstance(autocast, torch.dtype) else None,
            reduce_bucket=(config.zero_settings or ZeroSettings()).reduce_bucket,
        )
        self.recompute = {c: self._recompute(one, c) for c in CHECKPOINTING_BY_RECOMPUTE}
        weights = next((p.dtype for p in program.model.parameters() if p.is_floating_point()), None)
        chosen = autocast if autocast is not None else weights
        self.compute_dtype = str(chosen).removeprefix("torch.") if chosen is not None else "float32"
        """The dtype the step's matmuls run in: the autocast dtype, else the weights' floating dtype."""

    def cheapest(self, gpus: int, gpus_per_node: int | None = None) -> Candidate | None:
        """The cheapest candidate on ``gpus`` GPUs in nodes of ``gpus_per_node`` (``GPUS_PER_NODE`` when None) that
        fits, measuring them cheapest (lower bound) first."""
        every = list(settings(gpus, self.source, self.config, gpus_per_node))
        allowed = set(every)
        possible = [s for s in every if self._possible(s)]
        while (reference := self._reference_key(possible)) is not None:  # one trace that may rule many layouts out
            if self.progress is not None:
                self.progress(f"{len(possible)} of {len(every)} settings on {gpus} GPU(s) pass the bound so far")
            if self._traced(reference) is not None:
                self.references.append(self._reference(reference))
            self.referenced.add(reference)
            possible = [s for s in possible if self._possible(s)]
        self.pending = {s.trace_key for s in possible}
        if self.progress is not None:
            self.progress(
                f"weighing {gpus} GPU(s): {len(possible)} of {len(every)} settings may fit, over at most "
                f"{len(self.pending - set(self.traces))} more trace(s) ({len(self.traces)} traced, "
                f"{len(self.measured)} measured so far)"
            )
        heap: list[_Entry] = [(self._bound(s), i, s, None) for i, s in enumerate(possible)]
        order = itertools.count(len(heap))
        deferred = self._weigh(heap, allowed, order, defer_auto=True)
        self._weigh(deferred, allowed, order, defer_auto=False)
        return self._incumbent(allowed)

    def _weigh(self, heap: list[_Entry], allowed: set[Setting], order: Iterator[int], *, defer_auto: bool) -> list[_Entry]:
        """Measure ``heap``'s settings cheapest (lower-bound key) first until one that fits costs no more than the
        rest; with ``defer_auto``, every ``auto`` is handed back unmeasured, to be weighed once the cheapest uniform
        fit is known (``_auto_may_win`` then needs a few what-ifs where measuring auto takes ~4 log2 L)."""
        heapq.heapify(heap)
        deferred: list[_Entry] = []
        while heap:
            entry = heapq.heappop(heap)
            key, _, setting, measured = entry
            incumbent = self._incumbent(allowed)
            if incumbent is not None and key > incumbent.key[:4]:  # everything left costs more
                self.skipped += sum(1 for _, _, left, _ in [entry, *heap] if left not in self.measured)
                break
            if measured is None:
                if not self._possible(setting):  # a trace made since tightened the bound
                    continue
                if defer_auto and setting.checkpointing == "auto":
                    deferred.append(entry)
                    continue
                if not self._auto_may_win(setting, incumbent):
                    self.skipped += 1
                    continue
                measured = self._measure(setting)
                if measured is not None and setting.checkpointing == "auto":  # its cost is known now: back in line
                    heapq.heappush(heap, (measured.key[:4], next(order), setting, measured))
        return deferred

    def _possible(self, setting: Setting) -> bool:
        """Whether ``setting`` may fit: its lower bound within the usable memory (else it is noted as ruled out)."""
        if setting in self.ruled_out:
            return False
        bound = self.bound.bytes(setting)
        if bound <= self.usable:
            if (1, 1, 1) not in self.referenced:
                self.referenced.add((1, 1, 1))
                self.references.append(self._reference((1, 1, 1)))
            bound = max([bound, *(b for r in self.references if (b := r.bytes(setting, self.bound)) is not None)])
        if bound <= self.usable:
            return True
        self.ruled_out[setting] = RuledOut(**_fields(setting), bound_bytes=bound)
        return False

    def _reference_key(self, possible: list[Setting]) -> tuple[int, int, int] | None:
        """The widest tensor-parallel program not yet a reference among ``possible`` settings' degrees: it bounds
        each of its context-parallel layouts with its own tensors (a wider one bounds a narrower by its smaller
        ones, a narrower one a wider by its tensors split as if none were whole), so after it their bounds are
        within what context parallelism and the scheme add; a program already traced costs only its what-ifs."""
        widths = {s.tp for s in possible if s.pp == 1 and s.ep == 1} - {key[0] for key in self.referenced}
        return (max(widths), 1, 1) if widths else None

    def _reference(self, key: tuple[int, int, int]) -> TracedBound:
        traced = self.traces[key]
        assert traced is not None
        tp, _, cp = key
        autocast = self.config.mixed_precision
        return TracedBound.of(
            traced.graph,
            tp=tp,
            cp=cp,
            tokens=self.config.seq_len // cp,
            autocast_itemsize=autocast.itemsize if isinstance(autocast, torch.dtype) else None,
            persistence_threshold=(self.config.zero_settings or ZeroSettings()).param_persistence_threshold,
            bucket_bytes=self.bound.bucket_bytes,
        )

    def _bound(self, setting: Setting) -> tuple[float, ...]:
        """The setting's cost key without its memory; for ``auto`` a lower bound (no recompute)."""
        bubble = self._bubble(setting)
        if setting.checkpointing == "auto":
            return setting.gpus, round(bubble, 9), 0.0, self._communication(setting, 0)
        share, ops, layers = self.recompute[setting.checkpointing]
        return setting.gpus, round(share + bubble, 9), ops, self._communication(setting, layers)

    def rank_step(self, candidate: Candidate) -> tuple[nx.MultiDiGraph, CheckpointCost | None]:
        """The traced graph of ``candidate``'s rank program and what its checkpointing recomputes there (None
        without checkpointing): what the step's FLOPs are read from, with no other trace."""
        traced = self.traces[candidate.tp, candidate.ep, candidate.cp]
        assert traced is not None, "a measured candidate's program was traced"
        plan = parse_checkpointing(candidate.plan)
        return traced.graph, None if plan.kind == "none" else self._cost(traced, plan)

    def report(self, candidate: Candidate, options: dict[str, Any]) -> Report:
        """``simulate``'s report of ``candidate`` with ``options`` (``simulate``'s, giving ``candidate``'s setting)
        from its rank program's trace; without ``memory_history``, which reads the records."""
        traced = self.traces[candidate.tp, candidate.ep, candidate.cp]
        assert traced is not None, "a measured candidate's program was traced"
        assert not self.config.memory_history, "the records are not kept"
        whole = Traced(traced.program, traced.specs, Trace(notes=traced.notes), traced.graph, None)
        return traced_report(self.model, whole, **options)

    def _incumbent(self, allowed: set[Setting]) -> Candidate | None:
        """The cheapest candidate measured among ``allowed`` (one GPU count's settings) that fits, popped or not:
        the answer costs no more."""
        fitting = [c for s, c in self.measured.items() if s in allowed and c.fits]
        return min(fitting, key=lambda c: (c.key, c.checkpointing == "auto"), default=None)  # a tie: the uniform choice

    def _auto_may_win(self, setting: Setting, incumbent: Candidate | None) -> bool:
        """Whether ``auto`` on ``setting`` can cost no more than ``incumbent``, from a few what-ifs, not auto's ~4 log2 L.

        ``auto`` (``budgeted_plan``) takes the least F for which ``first:F+selective:(L - F)`` fits (either policy),
        memory falling as F grows (the monotony its binary search assumes), and its plan recomputes at least what
        ``first:F`` does. Let F* be the most full layers whose recompute, with the bubble, is within the incumbent's
        share: if ``first:F*+selective:(L - F*)`` fits under neither policy, auto's F exceeds F*, so its share, and
        its key, exceed the incumbent's, and it is not measured. A plan a traced reference bounds above the usable
        memory (``TracedBound.plan_bytes``) fits under no policy: its what-if is not run. On a layout not traced yet,
        a floor of the recompute (``RecomputeFloor``) and those bounds may settle it without its trace."""
        if setting.checkpointing != "auto" or incumbent is None:
            return True
        budget, bubble = incumbent.key[1], self._bubble(setting)
        if round(bubble, 9) > budget:  # even recomputing nothing costs more
            return False
        if setting.trace_key not in self.traces and self._auto_floored_out(setting, budget, bubble):
            return False
        traced = self._traced(setting.trace_key, f"{_described(setting)} on {setting.gpus} GPU(s), checkpointing auto")
        if traced is None:
            return True  # measured as auto, where the refusal is noted
        layers = 1 + max(unit.index for unit in traced.graph.graph["units"])  # as auto counts them

        def share(full: int) -> float:
            return self._cost(traced, _full_layers(full, layers)).recomputed_flops / max(traced.step_flops, 1) + bubble

        most = _most_full_layers(share, layers, budget)
        if most == layers:
            return True
        config = SimulationConfig.from_options(**self.base, **setting.options())
        analysis = Analysis(traced.graph, self.target, config, routed=traced.routed)
        for plan in _auto_plans(most, layers):
            if not self._plan_may_fit(setting, plan, _managed(traced.graph)):  # bounded above the usable memory
                continue
            try:
                if analysis.fits(analysis.run(plan).memory):
                    return True
            except (ConfigError, UnsupportedError):
                return True  # measured as auto, where the refusal is noted
        return False

    def _auto_floored_out(self, setting: Setting, budget: float, bubble: float) -> bool:
        """Whether ``auto`` on ``setting``, whose layout is not traced, costs more than ``budget``: ``_auto_may_win``'s
        argument with a floor of each ``first:F`` share (``RecomputeFloor``, off a traced reference of the same tp
        whose context parallelism divides the setting's), so F* is at least the layout's own, and the references'
        bounds of ``first:F*+selective:(L - F*)`` above the usable memory under both policies. False where no
        reference gives a floor (one needs a dense decoder whose attention ran as SDPA) or the bounds do not settle it."""
        tp, ep, cp = setting.trace_key
        if ep > 1 or self.shape.top_k:
            return False
        keys = [k for k, t in self.traces.items() if t is not None and k[0] == tp and k[1] == 1 and cp % k[2] == 0]
        if not keys:
            return False
        key = max(keys, key=lambda k: k[2])
        reference = self.traces[key]
        assert reference is not None
        if key not in self.floors:
            self.floors[key] = RecomputeFloor.of(reference.graph, cp=key[2], tokens=self.config.seq_len // key[2])
        floor = self.floors[key]
        if floor is None:
            return False
        layers = 1 + max(unit.index for unit in reference.graph.graph["units"])

        def share(full: int) -> float:
            flops = self._cost(reference, _full_layers(full, layers)).recomputed_flops
            return float(floor.share(flops, full, cp)) + bubble

        most = _most_full_layers(share, layers, budget)
        if most == layers:
            return False
        managed = _managed(reference.graph)  # the same tp's weights, so the same paged states
        return not any(self._plan_may_fit(setting, plan, managed) for plan in _auto_plans(most, layers))

    def _plan_may_fit(self, setting: Setting, plan: CheckpointPlan, managed: int) -> bool:
        """Whether ``setting`` under ``plan`` may fit (``Analysis.fits``): no traced reference bounds it above the
        usable memory, less the ``managed`` memory (paged optimizer states) the device figure counts and
        ``Analysis.fits`` does not."""
        bounds = (reference.plan_bytes(setting, self.bound, plan) for reference in self.references)
        return all(bound is None or bound - managed <= self.usable for bound in bounds)

    def _cost(self, traced: _Traced, plan: CheckpointPlan) -> CheckpointCost:
        if plan.spec not in traced.costs:
            traced.costs[plan.spec] = what_if(traced.graph, plan).cost
        return traced.costs[plan.spec]

    def _measure(self, setting: Setting) -> Candidate | None:
        """The setting's what-if on its layout's trace; None (with a note) where vramsim or the model refuses it."""
        if setting in self.measured:
            return self.measured[setting]
        described = f"{_described(setting)} on {setting.gpus} GPU(s), checkpointing {setting.checkpointing}"
        traced = self._traced(setting.trace_key, described)
        if traced is None:
            return None
        if self.progress is not None:
            self.progress(f"measuring {described} ({len(self.measured) + 1} measured so far)")
        try:
            config = SimulationConfig.from_options(**self.base, **setting.options())
            outcome = Analysis(traced.graph, self.target, config, routed=traced.routed).run(
                parse_checkpointing(setting.checkpointing)
            )
        except (ConfigError, UnsupportedError) as exc:
            layout = {name: getattr(setting, name) for name in ("gpus", "tp", "pp", "cp", "ep", "scheme")}
            self.refused.append(Refusal(**layout, reason=str(exc)))
            return None
        plan = outcome.what_if.plan
        if setting.checkpointing == "auto":
            cost = outcome.what_if.cost
            share, ops = cost.recomputed_flops / max(traced.step_flops, 1), round(cost.recomputed_ops / traced.step_ops, 9)
            layers = float(self.shape.layers if plan.kind == "full" else plan.full_layers if plan.kind == "first" else 0)
        else:
            share, ops, layers = self.recompute[setting.checkpointing]
        candidate = Candidate(
            **_fields(setting),
            plan=plan.spec,
            device_bytes=outcome.memory.unlimited_device_bytes,  # not counting on the cache being emptied
            peak_bytes=outcome.memory.peak_bytes,
            fits=outcome.memory.unlimited_device_bytes <= self.usable,
            recomputed=round(share, 9),
            recomputed_ops=ops,
            bubble=self._bubble(setting),
            communication=self._communication(setting, layers),
        )
        self.measured[setting] = candidate
        return candidate

    def _bubble(self, setting: Setting) -> float:
        if setting.pp == 1:
            return 0.0
        virtual = self.config.pp_virtual_stages if setting.pp_schedule == "interleaved-1f1b" else 1
        return pipeline_bubble(setting.pp, self.config.micro_batches or setting.pp, virtual)

    def _communication(self, setting: Setting, recomputed_layers: float) -> float:
        virtual = self.config.pp_virtual_stages if setting.pp_schedule == "interleaved-1f1b" else 1
        micro_batches = (self.config.micro_batches or setting.pp) if setting.pp > 1 else 1
        scheme = setting.scheme if setting.scheme in SCHEMES else None
        return round(
            communication_bytes(
                self.shape,
                scheme=scheme,
                dp=setting.dp,
                tp=setting.tp,
                pp=setting.pp,
                virtual=virtual,
                micro_batches=micro_batches,
                cp=setting.cp,
                ep=setting.ep,
                recomputed_layers=recomputed_layers,
            )
        )

    def _recompute(self, traced: _Traced, choice: str) -> tuple[float, float, float]:
        """A uniform choice's recomputed FLOPs and ops as shares of the step's, and the layers it runs again in full."""
        plan = parse_checkpointing(choice)
        cost = what_if(traced.graph, plan).cost if choice != "none" else None
        full = sum(1 for layer in range(self.shape.layers) if plan.checkpointed(layer) and not plan.selective_at(layer))
        if cost is None:
            return 0.0, 0.0, 0.0
        return (
            round(cost.recomputed_flops / max(traced.step_flops, 1), 9),
            round(cost.recomputed_ops / traced.step_ops, 9),
            float(full),
        )

    def _traced(self, key: tuple[int, int, int], purpose: str = "a bound of the layouts it covers") -> _Traced | None:
        """The rank program of ``key``, traced for ``purpose`` (said in the progress line) if not yet; None if refused."""
        if key not in self.traces:
            tp, ep, cp = key
            if self.progress is not None and not self._reused(key):
                most = len(self.traces) + len(self.pending - set(self.traces))
                self.progress(
                    f"tracing {self.model_name} for {_degrees(tp=tp, ep=ep, cp=cp) or 'one rank'} "
                    f"(trace {len(self.traces) + 1} of at most {max(most, len(self.traces) + 1)}), for {purpose}"
                )
            try:
                self._trace(key)
            except (ConfigError, UnsupportedError) as exc:
                self.refused.append(Refusal(gpus=None, tp=tp, pp=1, cp=cp, ep=ep, scheme=None, reason=str(exc)))
                self.traces[key] = None
        return self.traces[key]

    def _reused(self, key: tuple[int, int, int]) -> bool:
        """Whether the rank program of ``key`` was traced by a search sharing its traces, on a GPU alike."""
        return self.shared is not None and (self.alike, key) in self.shared.traces

    def _trace(self, key: tuple[int, int, int]) -> Any:
        """Trace the rank program of ``key`` (tp, ep, cp), or take a sharing search's trace of it; returns the
        program."""
        if self.shared is not None and self._reused(key):
            taken = self.traces[key] = self.shared.traces[self.alike, key]
            return taken.program
        tp, ep, cp = key
        config = SimulationConfig.from_options(**self.base, tp=tp, ep=ep, cp=cp)
        program, specs, trace = build_and_trace(self.model, config, self.target, checkpointing="marked")
        graph = build_graph(trace)
        ops = [data for _, data in step_ops(graph)]  # one step's, as a what-if's recompute cost is
        traced = self.traces[key] = _Traced(
            graph=graph,
            program=program,
            specs=specs,
            notes=trace.notes,
            routed=routed_rows(program.model, config) if ep > 1 else None,
            step_flops=sum(op["flops"] for op in ops),
            step_ops=len(ops),
        )
        if self.shared is not None:
            self.shared.traces[self.alike, key] = traced
        return program


def _full_layers(full: int, layers: int) -> CheckpointPlan:
    """``first:full``, or ``full`` when that is every layer."""
    return CheckpointPlan("full") if full == layers else first_layers(full)


def _auto_plans(full: int, layers: int) -> Iterator[CheckpointPlan]:
    """``first:full+selective:(layers - full)`` under each selective policy (``selective`` when ``full`` is 0)."""
    for torchtitan in (False, True):
        yield (
            first_layers(full, layers - full, torchtitan=torchtitan)
            if full
            else CheckpointPlan("selective", torchtitan=torchtitan)
        )


def _managed(graph: nx.MultiDiGraph) -> int:
    """Bytes of the program's managed (paged) storages."""
    return sum(graph.nodes[("storage", sid)]["nbytes"] for sid in graph.graph.get("managed", ()))


def _most_full_layers(share: Callable[[int], float], layers: int, budget: float) -> int:
    """F*: the most full layers F in [0, ``layers``] whose step share (``share(F)`` for F >= 1, recompute and bubble,
    growing with F; F = 0 is the bubble alone, which the caller has checked) is within ``budget``. One full layer over
    the budget settles it without a binary search."""

    def within(full: int) -> bool:
        return round(share(full), 9) <= budget

    return _most(within, layers) if within(1) else 0


def _most(ok: Callable[[int], bool], high: int) -> int:
    """The most n in [0, high] with ``ok(n)``, ``ok`` true at 0 and monotone (true, then false)."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if ok(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _described(setting: Setting) -> str:
    """``TP 8 x CP 4 x FSDP2 full``."""
    degrees = _degrees(**{name: getattr(setting, name) for name in ("tp", "pp", "cp", "ep")})
    return f"{degrees} x {setting.scheme}" if degrees else setting.scheme


def _degrees(**degrees: int) -> str:
    """``TP 8 x CP 4``: the degrees above 1, in the order given."""
    return " x ".join(f"{name.upper()} {degree}" for name, degree in degrees.items() if degree > 1)


def _fields(setting: Setting) -> dict[str, Any]:
    """The setting's own fields (a ``Candidate`` or ``RuledOut`` is made of them and what was found)."""
    return {f.name: getattr(setting, f.name) for f in fields(Setting)}
