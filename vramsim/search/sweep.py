"""``vramsim.sweep``: the figures of every point of a grid, most of them derived from a few traces.

The grid is batch sizes x sequence lengths x devices x checkpointing choices x GPU counts. The device changes the
traced program (the target's kernels), checkpointing and the GPU count are what-ifs over it, so each device's
batch x sequence grid is traced apart. It is answered box by box (``_prove_all``). A box whose two extreme corners
have the structure of a fit already proven, which gives both corners' every size to the byte, is derived from that
fit. Any other box traces a tensor grid of its points (``BATCH_NODES`` batch sizes and ``SEQ_NODES`` lengths,
spread over it) and one more point inside it; when the grid's traces share one structure and the polynomials
through them give the further point's every size to the byte (``sweep_sizes.py``), the box's other points are
derived and the fit is kept for its structure; otherwise the box is split where its structures change, and a box of
no more points than a proof traces is traced whole. The polynomials' degrees are not assumed: a size that is not
such a polynomial fails the proof, and its points are traced.

The one assumption (docs/sweep.md): a program's structure changes at thresholds of sizes that grow with the batch
and the length (a kernel above so many tokens, batch 1 against more), so a box whose smallest and largest points
have one structure holds no other.

Every point, traced or derived, is analysed the same way on this machine: its sizes written into a graph of its
structure, then ``Analysis`` (the checkpointing what-if, data parallelism, the allocator replay) per checkpointing
choice and GPU count, the figures ``simulate`` reports for the same options; a structure's first point here, the
others' replays of its timeline in local processes (``sweep_answers``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import numpy as np

from vramsim.analysis.device_memory import DeviceMemory, MemoryFigures, TimelineReplay
from vramsim.analysis.whatifs import Analysis, Outcome
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.config import SimulationConfig
from vramsim.config.choices import parse_loss
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing_plan import CheckpointPlan, parse_checkpointing
from vramsim.results.sweep import Answer, Sweep, SweepPoint
from vramsim.search.sweep_answers import ReplayChunk, replay_chunks, run_replays
from vramsim.search.sweep_grid import MAX_POINTS, axis_values
from vramsim.search.sweep_sizes import Resized, SizeFit, block_sources, quantities, structure
from vramsim.search.sweep_workers import Backend, Failed, TraceTask, run_traces
from vramsim.tracer.collector import collector_paused
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import Trace
from vramsim.workload.attention import check_attention
from vramsim.workload.losses import check_loss_target
from vramsim.workload.models import ModelSource, model_name, pipeline_index, with_default_task, with_model_defaults
from vramsim.workload.optimizers import check_target
from vramsim.workload.targets import resolve_target

__all__ = ["BATCH_NODES", "SEQ_NODES", "sweep"]

BATCH_NODES = 2
"""Batch sizes a box traces (its smallest and largest): sizes of degree 1 in the batch are interpolated exactly."""
SEQ_NODES = 3
"""Sequence lengths a box traces (smallest, middle, largest): degree 2 in the length (attention's scores)."""

Progress = Callable[[str, int, int], None]
"""Told ``(stage, done, total)``: ``tracing`` (each trace of a round) and ``answering`` (each row: a point under a
checkpointing choice and GPU count)."""

Box = tuple[tuple[int, ...], tuple[int, ...]]
Point = tuple[int, int]


def sweep(
    model: ModelSource,
    *,
    batch_size: int | str | Iterable[int] = 1,
    seq_len: int | str | Iterable[int] | None = None,
    device: str | Iterable[str] = "h100",
    checkpointing: str | Iterable[str] = "none",
    gpus: int | str | Iterable[int] = 1,
    backend: Backend = "local",
    address: str | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> Sweep:
    """Every point of ``batch_size x seq_len x device x checkpointing x gpus``: peak, reserved, device and verdict,
    each point traced or derived from traces of the same structure (``Sweep.points[i].answer``).

    Each axis is a value, a sequence of values, or the command line's text (``"1,2,4"``, ``"512:32768:x2"``).
    ``seq_len`` none given is ``simulate``'s default for the model (``workload.models.with_model_defaults``).
    ``options`` are ``simulate``'s other keywords, shared by every point. The traces run in local worker processes
    (``jobs`` of them, default one per CPU) or, with ``backend="ray"``, on the Ray cluster at ``address``. The
    answer is kept in the result cache (``cache`` as ``simulate`` takes it), keyed by the axes and the options, not
    by where the traces ran: the same sweep asked again traces nothing.

    >>> found = sweep("gpt2", batch_size=[1, 2, 4], seq_len="64:256:x2", device="rtx-4090")
    >>> found.points[0].answer, len(found.points)
    ('traced', 9)
    """
    if seq_len is None:
        seq_len = with_model_defaults(model, options)["seq_len"]
    axes = {
        "batch_size": axis_values(batch_size, "batch_size"),
        "seq_len": axis_values(seq_len, "seq_len"),
        "device": axis_values(device, "device"),
        "checkpointing": axis_values(checkpointing, "checkpointing"),
        "gpus": axis_values(gpus, "gpus"),
    }
    options = with_default_task(model, options)
    _check(model, options, axes)
    run = _Run(backend=backend, address=address, jobs=jobs, told=progress or (lambda stage, done, total: None))
    return cached_answer(
        cache, Sweep, lambda: request_key("sweep", model, options, axes=axes), lambda: _swept(model, options, axes, run)
    )


@dataclass(frozen=True, slots=True)
class _Run:
    """Where and how the traces run, and whom to tell: nothing an answer depends on."""

    backend: Backend
    address: str | None
    jobs: int | None
    told: Progress


def _swept(model: ModelSource, options: dict[str, Any], axes: dict[str, tuple], run: _Run) -> Sweep:
    """``sweep``'s answer, traced and derived."""
    started = time.perf_counter()
    points: list[SweepPoint] = []
    traces = 0
    for name in axes["device"]:
        grid = _DeviceGrid(model, options | {"device": name}, axes, run)
        points += grid.answer()
        traces += grid.traces
    return Sweep(
        model=model_name(model),
        task=options["task"],
        headroom=SimulationConfig.from_options(**options).headroom,
        points=points,
        largest=_largest(points),
        traces=traces,
        seconds=round(time.perf_counter() - started, 3),
    )


def _check(model: ModelSource, options: dict[str, Any], axes: dict[str, tuple]) -> None:
    """Every combination's options, at the grid's corners, as ``simulate`` checks them; what a sweep cannot vary."""
    if pipeline_index(model) is not None:
        raise UnsupportedError("a sweep sizes a single model's step; a diffusion pipeline has no seq_len")
    fixed = sorted(set(options) & set(axes))
    if fixed:
        raise ConfigError(f"{fixed[0]!r} is an axis of the sweep; give its values as that keyword")
    count = 1
    for values in axes.values():
        count *= len(values)
    if count > MAX_POINTS:
        raise ConfigError(f"the sweep has {count:,} points, more than {MAX_POINTS:,}; give fewer values")
    if options["task"] == "generate":
        raise UnsupportedError("a sweep sizes a train or forward step; task='generate' is sized by max_new_tokens")
    if "all" in axes["checkpointing"]:
        raise ConfigError("checkpointing 'all' is a table of its own; list the choices to sweep (none,full,selective)")
    corners = [(axes["batch_size"][0], axes["seq_len"][0]), (axes["batch_size"][-1], axes["seq_len"][-1])]
    for name, spec, world, (b, s) in product(axes["device"], axes["checkpointing"], axes["gpus"], corners):
        config = SimulationConfig.from_options(**options, batch_size=b, seq_len=s, device=name, checkpointing=spec, gpus=world)
        if config.ep > 1 or config.device_map is not None:
            raise UnsupportedError("a sweep of expert parallelism or a device map is not modelled yet; trace each point")
        target = resolve_target(config.device)
        check_attention(config.attn_implementation, target.profile)
        check_loss_target(parse_loss(config.loss) if isinstance(config.loss, str) else None, target.profile)
        check_target(config.optimizer, target.profile.vendor)


@dataclass(slots=True)
class _Derived:
    """A point answered from ``fit``, in a graph of its box's structure."""

    fit: SizeFit
    resized: Resized


class _DeviceGrid:
    """One device's batch x sequence grid: the boxes proved, the points traced, then every point analysed."""

    def __init__(
        self,
        model: ModelSource,
        options: dict[str, Any],
        axes: dict[str, tuple],
        run: _Run,
    ) -> None:
        self._model, self._options, self._axes = model, options, axes
        self._run = dict(backend=run.backend, address=run.address, jobs=run.jobs)
        self._jobs = 1 if run.backend == "ray" else run.jobs
        """Processes for the replays: on a Ray backend this one (local worker processes started beside a Ray client in
        the same process were seen to hang; not diagnosed)."""
        self._told = run.told
        self._traced: dict[Point, Trace | Failed] = {}
        self._structures: list[tuple[tuple[Any, ...], Resized]] = []
        self._shapes: dict[Point, tuple[Any, ...]] = {}
        self._proven: list[tuple[tuple[Any, ...], _Derived]] = []
        """Each proven fit, by the structure it sizes."""
        self._replays: dict[tuple[Resized, str, int], _Replay | None] = {}
        """Each structure's what-if timeline per checkpointing choice and GPU count, from its first point analysed
        (``None``: each point is analysed whole)."""
        self._target = resolve_target(options["device"])
        self.traces = 0

    def answer(self) -> list[SweepPoint]:
        """Every point of this device's grid, for each checkpointing choice and GPU count: the first point of each
        structure analysed whole here, the rest replayed on its timeline in local processes (``sweep_answers``)."""
        answers = self._prove_all()
        retrace = []
        rows: list[SweepPoint] = []
        pending: list[_Pending] = []
        combos = len(self._axes["checkpointing"]) * len(self._axes["gpus"])
        answered = _Count(self._told, len(answers) * combos)
        with collector_paused():  # each point's graph and timeline beside every trace: nothing to collect
            for point, answer in sorted(answers.items()):
                values = answer.fit.distinct(*point) if isinstance(answer, _Derived) else None
                if isinstance(answer, _Derived) and values is None:  # a size that is no whole number: no proof here
                    retrace.append(point)
                    continue
                figured = self._figures(point, answer, values, pending)
                rows += figured
                answered(len(figured))
        self._trace(retrace)
        with collector_paused():
            for point in retrace:
                figured = self._figures(point, self._traced[point], None, pending)
                rows += figured
                answered(len(figured))
        rows += self._replayed(pending, answered)
        order = {name: index for index, name in enumerate(self._axes["checkpointing"])}
        return sorted(rows, key=lambda p: (order[p.checkpointing], p.gpus, p.batch_size, p.seq_len))

    def _prove_all(self) -> dict[Point, Trace | Failed | _Derived]:
        """Each point's answer: its trace (or why it has none), or the proven fit of its structure.

        Round by round: once a fit is proven, every box's two extreme corners are traced first. A box whose
        corners share a structure already proven, and whose fit gives both corners to the byte, is derived at
        once (``_from_proven``). Any other box is proved on its own grid (``_plan``, ``_prove``); proven, its
        fit joins the structure's; not, it is split, and an edge strip split off (batch 1, the shortest length)
        waits until the rest is answered, so that it can reuse the rest's fit instead of proving its own."""
        boxes: list[Box] = [(self._axes["batch_size"], self._axes["seq_len"])]
        later: list[Box] = []
        answers: dict[Point, Trace | Failed | _Derived] = {}
        while boxes or later:
            if not boxes:
                boxes, later = later, []
            unproven = []
            if self._proven:  # else no box is answered by corners alone: its proof traces them with the rest
                self._trace([corner for box in boxes for corner in _corners(box)])
            for box in boxes:
                derived = self._from_proven(box) if self._proven else None
                if derived is None:
                    unproven.append(box)
                else:
                    self._answer(box, derived, answers)
            plans = [_plan(box, self._traced) for box in unproven]
            self._trace([point for plan in plans for point in plan.traced])
            boxes = []
            for box, plan in zip(unproven, plans, strict=True):
                if plan.whole:
                    self._answer(box, None, answers)
                    continue
                proof = self._prove(box, plan)
                if isinstance(proof, _Derived):
                    self._answer(box, proof, answers)
                    continue
                edge, rest = _halves(box, proof)
                if proof is not None and proof[1] == 1:
                    later.append(edge)  # the strip that alone differs: after the rest, whose fit it may reuse
                    boxes.append(rest)
                else:
                    boxes += [edge, rest]
        return answers

    def _answer(self, box: Box, derived: _Derived | None, answers: dict[Point, Trace | Failed | _Derived]) -> None:
        """The box's points: each traced one by its trace, the others by ``derived``."""
        for point in product(*box):
            answers[point] = self._traced.get(point) or derived  # type: ignore[assignment]

    def _from_proven(self, box: Box) -> _Derived | None:
        """The fit of a proven structure, where the box's two extreme corners (traced) both have that structure
        and the fit gives each corner's every size to the byte; ``None`` otherwise."""
        low, high = _corners(box)
        traces = [self._traced[low], self._traced[high]]
        if low == high or any(isinstance(trace, Failed) for trace in traces):
            return None
        shape = self._structure(low)
        if self._structure(high) != shape:
            return None
        for known, derived in self._proven:
            if known == shape and all(derived.fit.predicts(*corner, self._quantities(corner)) for corner in (low, high)):
                return derived
        return None

    def _prove(self, box: Box, plan: _Plan) -> _Derived | tuple[str, int | None] | None:
        """The box's fit, when its grid's traces share a structure and predict the further point to the byte; else
        where to split the box (``_halves``): along the axis the grid's structures change along, where they do
        (``None``: halved along the longer one). A proven fit is kept for its structure (``_from_proven``)."""
        if any(isinstance(self._traced[point], Failed) for point in plan.traced):
            return None
        shapes = {point: self._structure(point) for point in plan.traced}
        top = (plan.batches[-1], plan.seqs[-1])
        if any(shape != shapes[top] for shape in shapes.values()):
            return _split(box, plan, shapes)
        grid = {point: self._quantities(point) for point in plan.traced[:-1]}
        fit = SizeFit(plan.batches, plan.seqs, grid)
        further = plan.traced[-1]
        if not fit.predicts(*further, self._quantities(further)):
            return None
        derived = _Derived(fit, self._resized(shapes[top], self._traced[top]))  # type: ignore[arg-type]
        self._proven.append((shapes[top], derived))
        return derived

    def _structure(self, point: Point) -> tuple[Any, ...]:
        """The structure of the point's trace, made once."""
        if point not in self._shapes:
            self._shapes[point] = structure(self._traced[point])  # type: ignore[arg-type]
        return self._shapes[point]

    def _quantities(self, point: Point) -> list[int]:
        return quantities(self._traced[point])  # type: ignore[arg-type]

    def _resized(self, shape: tuple[Any, ...], trace: Trace) -> Resized:
        """The graph of ``shape``'s structure, built once from the first trace of it."""
        for known, resized in self._structures:
            if known == shape:
                return resized
        resized = Resized(build_graph(trace), trace)
        self._structures.append((shape, resized))
        return resized

    def _trace(self, points: Sequence[Point]) -> None:
        """Trace the points not yet traced, all at once on the backend."""
        wanted = [point for point in dict.fromkeys(points) if point not in self._traced]
        first = self._axes
        tasks = [
            TraceTask(
                self._model,
                self._options
                | {"batch_size": b, "seq_len": s, "checkpointing": first["checkpointing"][0], "gpus": first["gpus"][0]},
            )
            for b, s in wanted
        ]
        finished = 0

        def told() -> None:
            nonlocal finished
            finished += 1
            self._told("tracing", finished, len(tasks))

        for point, outcome in zip(wanted, run_traces(tasks, told=told, **self._run), strict=True):  # type: ignore[arg-type]
            self._traced[point] = outcome
        self.traces += sum(not isinstance(outcome, Failed) for outcome in (self._traced[p] for p in wanted))

    def _figures(
        self, point: Point, answer: Trace | Failed | _Derived, values: list[int] | None, pending: list[_Pending]
    ) -> list[SweepPoint]:
        """The point's figures for each checkpointing choice and GPU count (``values``: a derived point's
        ``SizeFit.distinct``): the first point of its structure analysed whole; for the others, where the what-if
        places every event by the graph's clocks alone (``Analysis.replays_resized``), that point's what-if
        timeline is to be replayed with their own sizes: those rows go to ``pending`` (``_replayed``)."""
        b, s = point
        combos = list(product(self._axes["checkpointing"], self._axes["gpus"]))
        if isinstance(answer, Failed):
            return [_failed(point, self._options["device"], spec, world, answer.reason) for spec, world in combos]
        how: Answer = "derived" if isinstance(answer, _Derived) else "traced"
        if isinstance(answer, _Derived):
            resized, sizes, fit = answer.resized, values or [], answer.fit
        else:
            resized, sizes, fit = self._resized(self._structure(point), answer), quantities(answer), None
        written = False
        rows = []
        for spec, world in combos:
            config = SimulationConfig.from_options(**self._options, batch_size=b, seq_len=s, checkpointing=spec, gpus=world)
            analysis = Analysis(resized.graph, self._target, config)
            replay = self._replays.get((resized, spec, world))
            if replay is not None:
                pending.append(_Pending(_Row(point, self._target.name, spec, world, how, analysis), replay, fit, sizes))
                continue
            plan = parse_checkpointing(config.checkpointing)
            every = sizes if fit is None else fit.expand(sizes)
            if not written:
                resized.write(every)
                written = True
            outcome = analysis.run(plan)
            if (resized, spec, world) not in self._replays:
                self._replays[resized, spec, world] = _Replay.of(analysis, plan, outcome, every, resized.storages)
            rows.append(_Row(point, self._target.name, spec, world, how, analysis).figured(outcome.memory))
        return rows

    def _replayed(self, pending: list[_Pending], answered: Callable[[int], None]) -> list[SweepPoint]:
        """The pending rows: their points replayed on their structure's timeline, the points of one timeline and
        fit in chunks over ``jobs`` local processes (``sweep_answers``)."""
        groups: dict[tuple[int, SizeFit | None], list[_Pending]] = {}
        for row in pending:
            groups.setdefault((id(row.replay), row.fit), []).append(row)
        chunks: list[ReplayChunk] = []
        rows: list[_Pending] = []
        for group in groups.values():
            replay, fit = group[0].replay, group[0].fit
            chunks += replay_chunks(replay.replay, replay.picked(fit), [row.values for row in group], jobs=self._jobs)
            rows += group
        figures = [memory for chunk in run_replays(chunks, jobs=self._jobs, told=answered) for memory in chunk]
        return [row.row.figured(memory) for row, memory in zip(rows, figures, strict=True)]


@dataclass(frozen=True, slots=True)
class _Row:
    """A row of the table but its figures."""

    point: Point
    device: str
    spec: str
    world: int
    how: Answer
    analysis: Analysis

    def figured(self, memory: DeviceMemory | MemoryFigures) -> SweepPoint:
        return SweepPoint(
            batch_size=self.point[0],
            seq_len=self.point[1],
            device=self.device,
            checkpointing=self.spec,
            gpus=self.world,
            peak_bytes=memory.peak_bytes,
            reserved_bytes=memory.reserved_bytes,
            device_bytes=memory.device_bytes,
            usable_bytes=self.analysis.usable_bytes,
            fits=self.analysis.fits(memory),
            answer=self.how,
        )


@dataclass(frozen=True, slots=True)
class _Pending:
    """A row to answer by replaying its structure's timeline with the point's ``values``."""

    row: _Row
    replay: _Replay
    fit: SizeFit | None
    values: list[int]


class _Count:
    """Tells the answering stage's progress, row by row."""

    def __init__(self, told: Progress, total: int) -> None:
        self._told, self._total, self._done = told, total, 0

    def __call__(self, rows: int) -> None:
        self._done += rows
        self._told("answering", self._done, self._total)


@dataclass(frozen=True, slots=True)
class _Replay:
    """A structure's what-if timeline under one checkpointing choice and its replay: another point's is the same
    events over blocks of that point's storages' bytes (``sources``: each block's storage, as ``block_sources``)."""

    replay: TimelineReplay
    sources: list[int]
    by_fit: dict[SizeFit, np.ndarray] = field(default_factory=dict)
    """``sources`` among each fit's distinct values (``SizeFit.distinct_of``)."""

    @staticmethod
    def of(analysis: Analysis, plan: CheckpointPlan, outcome: Outcome, values: list[int], storages: int) -> _Replay | None:
        """The outcome's timeline, where ``analysis.replays_resized(plan)`` and every block is a storage's bytes."""
        if not analysis.replays_resized(plan):
            return None
        sources = block_sources(outcome.timeline, values, storages)
        return None if sources is None else _Replay(analysis.timeline_replay(outcome.timeline), sources)

    def picked(self, fit: SizeFit | None) -> np.ndarray:
        """Where each block's bytes are among a point's values: its ``quantities``, or (``fit``) the fit's distinct
        values there."""
        if fit is None:
            return np.asarray(self.sources)
        if fit not in self.by_fit:
            self.by_fit[fit] = np.asarray(fit.distinct_of(self.sources))
        return self.by_fit[fit]


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a box traces: the grid ``batches x seqs`` then the further point (``traced``), or all of it (``whole``)."""

    batches: tuple[int, ...]
    seqs: tuple[int, ...]
    traced: list[Point]
    whole: bool


def _plan(box: Box, traced: Container[Point]) -> _Plan:
    """The box's proof, or the whole box where the proof would trace as many points; its further point one
    already traced where one lies between the nodes (``_further``)."""
    batches, seqs = _spread(box[0], BATCH_NODES), _spread(box[1], SEQ_NODES)
    grid = list(product(batches, seqs))
    if len(box[0]) * len(box[1]) <= len(grid) + 1:
        return _Plan(batches, seqs, list(product(*box)), whole=True)
    further = _further(box, batches, seqs, traced)
    if further in grid:  # every batch size and every length is a node: nothing between to derive
        return _Plan(batches, seqs, list(product(*box)), whole=True)
    return _Plan(batches, seqs, [*grid, further], whole=False)


def _further(box: Box, batches: tuple[int, ...], seqs: tuple[int, ...], traced: Container[Point]) -> Point:
    """The point that checks the fit: off the nodes on every axis that has values off them, the one nearest the
    middle that is already traced, else the middle one."""
    values = [[v for v in axis if v not in nodes] or list(nodes) for axis, nodes in zip(box, (batches, seqs), strict=True)]
    middle = (values[0][len(values[0]) // 2], values[1][len(values[1]) // 2])
    known = [(b, s) for b, s in product(*values) if (b, s) in traced]
    if not known:
        return middle
    return min(
        known,
        key=lambda p: (abs(values[0].index(p[0]) - len(values[0]) // 2) + abs(values[1].index(p[1]) - len(values[1]) // 2), p),
    )


def _corners(box: Box) -> tuple[Point, Point]:
    """The box's smallest and largest point."""
    return (box[0][0], box[1][0]), (box[0][-1], box[1][-1])


def _split(box: Box, plan: _Plan, shapes: dict[Point, tuple[Any, ...]]) -> tuple[str, int | None]:
    """Where to split a box whose grid's structures differ: along the axis they change along, the smallest value
    split off where it alone differs (batch 1 broadcasts where larger batches expand); where only the smallest
    corner differs (a kernel that takes a workspace above so many tokens), the strip of the smallest value of
    the shorter axis."""
    top = shapes[(plan.batches[-1], plan.seqs[-1])]
    differ = [point for point, shape in shapes.items() if shape != top]
    if differ == [(plan.batches[0], plan.seqs[0])] and len(plan.batches) > 1 and len(plan.seqs) > 1:
        return ("seq_len", 1) if len(box[0]) >= len(box[1]) else ("batch_size", 1)
    low = plan.batches[0]
    along_batch = any(shapes[b, s] != shapes[low, s] for b, s in plan.traced[:-1])
    nodes = plan.batches if along_batch else plan.seqs
    ends = [(nodes[0], plan.seqs[0]), (nodes[-1], plan.seqs[0])] if along_batch else [(low, nodes[0]), (low, nodes[-1])]
    axis = "batch_size" if along_batch else "seq_len"
    return (axis, 1) if shapes[ends[1]] == shapes[plan.traced[-1]] != shapes[ends[0]] else (axis, None)


def _spread(values: tuple[int, ...], count: int) -> tuple[int, ...]:
    """``count`` of ``values`` spread over them, both ends included (all of them when there are no more)."""
    if len(values) <= count:
        return values
    return tuple(values[round(i * (len(values) - 1) / (count - 1))] for i in range(count))


def _halves(box: Box, split: tuple[str, int | None] | None) -> list[Box]:
    """The box in two along ``split``'s axis, after its ``at``-th value (``None``: in halves); the longer axis
    where no axis is given or it has a single value."""
    batches, seqs = box
    axis, at = split or ("", None)
    if axis not in ("batch_size", "seq_len") or len(batches if axis == "batch_size" else seqs) < 2:
        axis, at = ("seq_len" if len(seqs) >= len(batches) else "batch_size"), None
    values = seqs if axis == "seq_len" else batches
    middle = at or len(values) // 2
    if axis == "seq_len":
        return [(batches, seqs[:middle]), (batches, seqs[middle:])]
    return [(batches[:middle], seqs), (batches[middle:], seqs)]


def _failed(point: Point, device: str, spec: str, world: int, reason: str) -> SweepPoint:
    return SweepPoint(
        batch_size=point[0],
        seq_len=point[1],
        device=resolve_target(device).name,
        checkpointing=spec,
        gpus=world,
        peak_bytes=None,
        reserved_bytes=None,
        device_bytes=None,
        usable_bytes=None,
        fits=None,
        answer="failed",
        error=reason,
    )


def _largest(points: list[SweepPoint]) -> list[SweepPoint]:
    """Per device, checkpointing and GPU count, the fitting point with the most tokens (the longer sequence on a tie)."""
    best: dict[tuple[str, str, int], SweepPoint] = {}
    for point in points:
        key = (point.device, point.checkpointing, point.gpus)
        held = best.get(key)
        if point.fits and (held is None or (point.tokens, point.seq_len) > (held.tokens, held.seq_len)):
            best[key] = point
    return list(best.values())
