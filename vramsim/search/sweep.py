"""``vramsim.sweep``: the figures of every point of a grid, most of them derived from a few traces.

The grid is batch sizes x sequence lengths x devices x checkpointing choices x GPU counts. The device changes the
traced program (the target's kernels), checkpointing and the GPU count are what-ifs over it, so each device's
batch x sequence grid is traced apart. It is answered box by box (``_prove``): a box traces a tensor grid of its
points (``BATCH_NODES`` batch sizes and ``SEQ_NODES`` lengths, spread over it) and one more point inside it. When
the grid's traces share one structure and the polynomials through them give the further point's every size to the
byte (``sweep_sizes.py``), the box's other points are derived; otherwise the box is halved along its longer axis and
each half proved on its own, and a box of no more points than a proof traces is traced whole. The polynomials'
degrees are not assumed: a size that is not such a polynomial fails the proof, and its points are traced.

Every point, traced or derived, is analysed the same way, here in the driver: its sizes written into a graph of its
structure, then ``Analysis`` (the checkpointing what-if, data parallelism, the allocator replay) per checkpointing
choice and GPU count, the figures ``simulate`` reports for the same options.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from vramsim.analysis.whatifs import Analysis
from vramsim.config import SimulationConfig
from vramsim.config.choices import parse_loss
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.results.sweep import Answer, Sweep, SweepPoint
from vramsim.search.sweep_grid import MAX_POINTS, axis_values
from vramsim.search.sweep_sizes import Resized, SizeFit, quantities, structure
from vramsim.search.sweep_workers import Backend, Failed, TraceTask, run_traces
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import Trace
from vramsim.workload.attention import check_attention
from vramsim.workload.losses import check_loss_target
from vramsim.workload.models import ModelSource, model_name, pipeline_index, with_default_task
from vramsim.workload.optimizers import check_target
from vramsim.workload.targets import resolve_target

__all__ = ["BATCH_NODES", "SEQ_NODES", "sweep"]

BATCH_NODES = 2
"""Batch sizes a box traces (its smallest and largest): sizes of degree 1 in the batch are interpolated exactly."""
SEQ_NODES = 3
"""Sequence lengths a box traces (smallest, middle, largest): degree 2 in the length (attention's scores)."""

Progress = Callable[[str, int, int], None]
"""Told ``(stage, done, total)``: ``tracing`` (each trace of a round) and ``answering`` (each point analysed)."""

Box = tuple[tuple[int, ...], tuple[int, ...]]
Point = tuple[int, int]


def sweep(
    model: ModelSource,
    *,
    batch_size: int | str | Iterable[int] = 1,
    seq_len: int | str | Iterable[int] = 512,
    device: str | Iterable[str] = "h100",
    checkpointing: str | Iterable[str] = "none",
    gpus: int | str | Iterable[int] = 1,
    backend: Backend = "local",
    address: str | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> Sweep:
    """Every point of ``batch_size x seq_len x device x checkpointing x gpus``: peak, reserved, device and verdict,
    each point traced or derived from traces of the same structure (``Sweep.points[i].answer``).

    Each axis is a value, a sequence of values, or the command line's text (``"1,2,4"``, ``"512:32768:x2"``).
    ``options`` are ``simulate``'s other keywords, shared by every point. The traces run in local worker processes
    (``jobs`` of them, default one per CPU) or, with ``backend="ray"``, on the Ray cluster at ``address``.

    >>> found = sweep("gpt2", batch_size=[1, 2, 4], seq_len="64:256:x2", device="rtx-4090")
    >>> found.points[0].answer, len(found.points)
    ('traced', 9)
    """
    started = time.perf_counter()
    told = progress or (lambda stage, done, total: None)
    axes = {
        "batch_size": axis_values(batch_size, "batch_size"),
        "seq_len": axis_values(seq_len, "seq_len"),
        "device": axis_values(device, "device"),
        "checkpointing": axis_values(checkpointing, "checkpointing"),
        "gpus": axis_values(gpus, "gpus"),
    }
    options = with_default_task(model, options)
    _check(model, options, axes)
    points: list[SweepPoint] = []
    traces = 0
    for name in axes["device"]:
        grid = _DeviceGrid(model, options | {"device": name}, axes, backend=backend, address=address, jobs=jobs, told=told)
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
        *,
        backend: Backend,
        address: str | None,
        jobs: int | None,
        told: Progress,
    ) -> None:
        self._model, self._options, self._axes = model, options, axes
        self._run = dict(backend=backend, address=address, jobs=jobs)
        self._told = told
        self._traced: dict[Point, Trace | Failed] = {}
        self._structures: list[tuple[tuple[Any, ...], Resized]] = []
        self.traces = 0

    def answer(self) -> list[SweepPoint]:
        """Every point of this device's grid, for each checkpointing choice and GPU count."""
        answers = self._prove_all()
        retrace = []
        points: list[SweepPoint] = []
        total = len(answers)
        for done, (point, answer) in enumerate(sorted(answers.items()), start=1):
            values = answer.fit.evaluate(*point) if isinstance(answer, _Derived) else None
            if isinstance(answer, _Derived) and values is None:  # a size that is no whole number: no proof here
                retrace.append(point)
                continue
            points += self._figures(point, answer, values)
            self._told("answering", done, total)
        self._trace(retrace)
        for point in retrace:
            points += self._figures(point, self._traced[point], None)
        order = {name: index for index, name in enumerate(self._axes["checkpointing"])}
        return sorted(points, key=lambda p: (order[p.checkpointing], p.gpus, p.batch_size, p.seq_len))

    def _prove_all(self) -> dict[Point, Trace | Failed | _Derived]:
        """Each point's answer: its trace (or why it has none), or the proven fit of its box."""
        boxes: list[Box] = [(self._axes["batch_size"], self._axes["seq_len"])]
        answers: dict[Point, Trace | Failed | _Derived] = {}
        while boxes:
            plans = [_plan(box) for box in boxes]
            self._trace([point for plan in plans for point in plan.traced])
            halves: list[Box] = []
            for box, plan in zip(boxes, plans, strict=True):
                derived = None if plan.whole else self._prove(plan)
                if not plan.whole and not isinstance(derived, _Derived):
                    halves += _halves(box, derived)
                    continue
                for point in product(*box):
                    answers[point] = self._traced.get(point) or derived  # type: ignore[assignment]
            boxes = halves
        return answers

    def _prove(self, plan: _Plan) -> _Derived | tuple[str, int | None] | None:
        """The box's fit, when its grid's traces share a structure and predict the further point to the byte; else
        where to split the box (``_halves``): along the axis the grid's structures change along, where they do
        (``None``: halved along the longer one)."""
        if any(isinstance(self._traced[point], Failed) for point in plan.traced):
            return None
        shapes = {point: structure(self._traced[point]) for point in plan.traced}  # type: ignore[arg-type]
        first = shapes[plan.traced[0]]
        if any(shape != first for shape in shapes.values()):
            along_batch = any(shapes[b, s] != shapes[plan.batches[0], s] for b, s in plan.traced[:-1])
            axis, nodes = ("batch_size", plan.batches) if along_batch else ("seq_len", plan.seqs)
            ends = (
                [(nodes[0], plan.seqs[0]), (nodes[-1], plan.seqs[0])]
                if along_batch
                else [(plan.batches[0], nodes[0]), (plan.batches[0], nodes[-1])]
            )
            # the smallest value alone differs (batch 1 broadcasts where larger batches expand): split it off
            return (axis, 1) if shapes[ends[1]] == shapes[plan.traced[-1]] != shapes[ends[0]] else (axis, None)
        grid = {point: quantities(self._traced[point]) for point in plan.traced[:-1]}  # type: ignore[arg-type]
        fit = SizeFit(plan.batches, plan.seqs, grid)
        further = plan.traced[-1]
        if not fit.predicts(*further, quantities(self._traced[further])):  # type: ignore[arg-type]
            return None
        return _Derived(fit, self._resized(first, self._traced[plan.traced[0]]))  # type: ignore[arg-type]

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

    def _figures(self, point: Point, answer: Trace | Failed | _Derived, values: list[int] | None) -> list[SweepPoint]:
        """The point's figures for each checkpointing choice and GPU count."""
        b, s = point
        combos = list(product(self._axes["checkpointing"], self._axes["gpus"]))
        if isinstance(answer, Failed):
            return [_failed(point, self._options["device"], spec, world, answer.reason) for spec, world in combos]
        how: Answer = "derived" if isinstance(answer, _Derived) else "traced"
        if isinstance(answer, _Derived):
            graph = answer.resized.write(values or [])
        else:
            graph = self._resized(structure(answer), answer).write(quantities(answer))
        target = resolve_target(self._options["device"])
        rows = []
        for spec, world in combos:
            config = SimulationConfig.from_options(**self._options, batch_size=b, seq_len=s, checkpointing=spec, gpus=world)
            analysis = Analysis(graph, target, config)
            memory = analysis.run(parse_checkpointing(config.checkpointing)).memory
            rows.append(
                SweepPoint(
                    batch_size=b,
                    seq_len=s,
                    device=target.name,
                    checkpointing=spec,
                    gpus=world,
                    peak_bytes=memory.peak_bytes,
                    reserved_bytes=memory.reserved_bytes,
                    device_bytes=memory.device_bytes,
                    usable_bytes=analysis.usable_bytes,
                    fits=analysis.fits(memory),
                    answer=how,
                )
            )
        return rows


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a box traces: the grid ``batches x seqs`` then the further point (``traced``), or all of it (``whole``)."""

    batches: tuple[int, ...]
    seqs: tuple[int, ...]
    traced: list[Point]
    whole: bool


def _plan(box: Box) -> _Plan:
    """The box's proof, or the whole box where the proof would trace as many points."""
    batches, seqs = _spread(box[0], BATCH_NODES), _spread(box[1], SEQ_NODES)
    grid = list(product(batches, seqs))
    if len(box[0]) * len(box[1]) <= len(grid) + 1:
        return _Plan(batches, seqs, list(product(*box)), whole=True)
    further = (_between(box[0], batches), _between(box[1], seqs))
    if further in grid:  # every batch size and every length is a node: nothing between to derive
        return _Plan(batches, seqs, list(product(*box)), whole=True)
    return _Plan(batches, seqs, [*grid, further], whole=False)


def _spread(values: tuple[int, ...], count: int) -> tuple[int, ...]:
    """``count`` of ``values`` spread over them, both ends included (all of them when there are no more)."""
    if len(values) <= count:
        return values
    return tuple(values[round(i * (len(values) - 1) / (count - 1))] for i in range(count))


def _between(values: tuple[int, ...], nodes: tuple[int, ...]) -> int:
    """A value that is not a node, near the middle of those that are not; a node when every value is one."""
    others = [value for value in values if value not in nodes]
    return others[len(others) // 2] if others else nodes[0]


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
