"""The largest batch size and sequence length that fit a target, each one a traced fact.

Device memory is close to affine in the batch size, and piecewise in the sequence length (attention
adds terms), so the secant through the two latest traced sizes predicts where it crosses the
target's usable memory (capacity less headroom). The predicted size is traced, then the one after
it: the answer is the largest traced size that fits, with the next size traced and not fitting,
never an extrapolation. Each search traces at most ``MAX_TRACES`` sizes (the given one included);
when they run out first, the answer is still the largest traced size that fits, marked not exact.

A size fits when its report says so (``Analysis.fits``, the rule of ``trace``'s verdict): where the unlimited
replay passes the usable memory, the replay within it may still run, the caching allocator emptying its cache
and retrying (each a device-wide synchronisation). The secant aims with the unlimited replay's device memory,
which grows with the size; the replay within the limit flattens there, which no secant can follow, so past a
size that fits only that way the search gallops (steps of 1, 1, 2, 4 ...) until a size does not fit, then bisects.

Known limitations: the search assumes memory grows with the size (more tokens never use less);
a sequence length stops at the model's configured position maximum (``vramsim/workload/positions.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vramsim.analysis.simulate import simulate
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.config import SimulationConfig
from vramsim.config.workload import MAX_BATCH, MAX_SEQ_LEN
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.results.fit import Largest, LargestFit
from vramsim.results.report import Report
from vramsim.workload.build import build_program
from vramsim.workload.models import ModelSource, pipeline_index, with_model_defaults
from vramsim.workload.positions import position_limit
from vramsim.workload.quantization.weights import quantized_kernels_on_meta
from vramsim.workload.targets import resolve_target

__all__ = ["MAX_TRACES", "SEQ_STEP", "largest_fit", "search"]

MAX_TRACES = 8
"""Most sizes traced per search, the given one included: an affine peak needs four (two for the
secant, the candidate, the one after it); the allocator's rounding makes it five to seven in practice."""

SEQ_STEP = 64
"""Sequence lengths are searched in multiples of 64 (when the given length and the model's maximum are):
lengths are chosen in such steps, and finer ones would cost traces on the allocator's rounding alone."""


def largest_fit(
    model: ModelSource,
    *,
    sizes: tuple[str, ...] = ("batch_size", "seq_len"),
    traced: Report | None = None,
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> LargestFit:
    """Search the largest ``batch_size`` and ``seq_len`` that fit ``device`` with ``headroom``, by tracing.

    ``options`` are ``simulate``'s; ``sizes`` the options searched; ``traced`` is their report when
    already traced (saves a trace; the answer, and so its cache entry, is the same); ``progress`` is told each
    size before it is traced; ``cache`` as in ``simulate``: the same search again is answered from the result cache.

    >>> fit = largest_fit("gpt2", device="rtx-4090", seq_len=256)
    >>> fit.batch_size.exact and fit.batch_size.device_bytes <= fit.usable_bytes
    True
    """
    options = with_model_defaults(model, options)
    return cached_answer(
        cache,
        LargestFit,
        lambda: request_key("largest_fit", model, options, sizes=sizes),
        lambda: _searched_fit(model, sizes, traced, progress, options),
    )


def _searched_fit(
    model: ModelSource,
    sizes: tuple[str, ...],
    traced: Report | None,
    progress: Callable[[str], None] | None,
    options: dict[str, Any],
) -> LargestFit:
    """``largest_fit``'s answer, searched by tracing."""
    config = SimulationConfig.from_options(**options)
    if not sizes or set(sizes) - {"batch_size", "seq_len"}:
        raise ConfigError(f"sizes must name batch_size, seq_len or both, got {sizes!r}")
    capacity = _check(model, config)
    usable = int(capacity * (1 - config.headroom))
    given = {"batch_size": config.batch_size, "seq_len": config.seq_len}
    reports: dict[tuple[int, int], Report] = {}
    if traced is not None:
        reports[config.batch_size, config.seq_len] = traced
    started = time.perf_counter()

    def measure(batch_size: int, seq_len: int) -> tuple[int, bool]:
        if (batch_size, seq_len) not in reports:
            if progress is not None:
                progress(f"tracing batch_size={batch_size} seq_len={seq_len} ({len(reports) + 1} traced so far)")
            reports[batch_size, seq_len] = simulate(model, **{**options, "batch_size": batch_size, "seq_len": seq_len})
        report = reports[batch_size, seq_len]
        pressure = report.allocator_pressure
        aim = report.device_bytes if pressure is None else pressure.unlimited_device_bytes
        return aim, bool(report.fits)  # trace's verdict, and a figure that grows with the size

    batch, seq = _search_sizes(model, config, sizes, measure, lambda b, s: reports[b, s].device_bytes, usable)
    return LargestFit(
        model=next(iter(reports.values())).model,
        target=next(iter(reports.values())).target,
        headroom=config.headroom,
        usable_bytes=usable,
        batch_size=batch,
        seq_len=seq,
        given=given,
        traces=len(reports),
        trace_seconds=round(time.perf_counter() - started, 3),
    )


def _search_sizes(
    model: ModelSource,
    config: SimulationConfig,
    sizes: tuple[str, ...],
    measure: Callable[[int, int], tuple[int, bool]],
    shown: Callable[[int, int], int],
    usable: int,
) -> tuple[Largest | None, Largest | None]:
    """The largest batch size and sequence length searched for (``None`` for a size not in ``sizes``),
    each with the other held at its given value; ``shown``: a traced size's device memory, as its report gives it."""
    batch = seq = None
    if "batch_size" in sizes:
        batch = _largest(
            "batch_size",
            lambda b: measure(b, config.seq_len),
            lambda b: shown(b, config.seq_len),
            start=config.batch_size,
            bound=MAX_BATCH,
            bound_by="vramsim's limit",
            usable=usable,
        )
    if "seq_len" in sizes:
        field, top = _seq_bound(model, config)
        seq = _largest(
            "seq_len",
            lambda s: measure(config.batch_size, s),
            lambda s: shown(config.batch_size, s),
            start=config.seq_len,
            bound=top,
            bound_by=field,
            usable=usable,
            step=SEQ_STEP,
        )
    return batch, seq


def _check(model: ModelSource, config: SimulationConfig) -> int:
    """The target's capacity, once the run is one the search applies to."""
    if pipeline_index(model) is not None:  # first: a pipeline's default task is generate
        raise UnsupportedError("the largest fit is searched for a single model; a diffusion pipeline has no seq_len")
    if config.task == "generate":
        raise UnsupportedError(
            "task='generate' has no largest fit searched (its length is max_new_tokens); search a train or forward run"
        )
    if config.checkpointing == "all":
        raise ConfigError("checkpointing='all' compares choices; the largest fit is searched for one choice")
    capacity = resolve_target(config.device).profile.memory_bytes
    if capacity is None:
        raise ConfigError(f"device={config.device!r} has no fixed memory to fit in; name a GPU (vramsim gpus)")
    return capacity


def _seq_bound(model: ModelSource, config: SimulationConfig) -> tuple[str, int]:
    """The longest sequence to try: the model's configured position maximum where it has one."""
    if config.inputs is not None:  # the user's inputs say their own length
        return "vramsim's limit", MAX_SEQ_LEN
    with quantized_kernels_on_meta(config.quantization, config.device):  # a quantized model is built as a trace builds it
        program = build_program(model, config, device="meta", checkpointing="marked")
    limit = position_limit(program.modules[""])
    return ("vramsim's limit", MAX_SEQ_LEN) if limit is None else (limit[0], min(limit[1], MAX_SEQ_LEN))


def _largest(
    option: str,
    measure: Callable[[int], tuple[int, bool]],
    shown: Callable[[int], int],
    *,
    start: int,
    bound: int,
    bound_by: str,
    usable: int,
    step: int = 1,
) -> Largest:
    """The search over multiples of ``step``, when the given value and the bound are such multiples."""
    step = step if start % step == 0 and bound % step == 0 else 1
    units = search(lambda k: measure(k * step), start=start // step, bound=bound // step, usable=usable)
    points = {k * step: point for k, point in units.items()}
    value = max((x for x, (_, fits) in points.items() if fits), default=None)
    over = min((x for x, (_, fits) in points.items() if not fits and x > (value or 0)), default=None)
    return Largest(
        option=option,
        value=value,
        device_bytes=None if value is None else shown(value),
        over=over,
        over_bytes=None if over is None else shown(over),
        bound=bound,
        bound_by=bound_by,
        step=step,
        exact=value == bound or over == (value or 0) + step,
    )


def search(
    measure: Callable[[int], tuple[int, bool]], *, start: int, bound: int, usable: int, budget: int = MAX_TRACES
) -> dict[int, tuple[int, bool]]:
    """Measured (bytes, fits) by value in 1..``bound``, until the largest value that fits has the next one
    measured (or is ``bound``, or 1 does not fit), or ``budget`` values are measured. The secant aims at
    ``usable`` bytes; ``measure`` says whether a value fits, which past ``usable`` bytes it still may (the
    allocator emptying its cache): from such a value the search gallops, then bisects."""
    points: dict[int, tuple[int, bool]] = {}
    order: list[int] = []
    value = min(max(start, 1), bound)
    while len(points) < budget:
        points[value] = measure(value)
        order.append(value)
        low = max((x for x, (_, fits) in points.items() if fits), default=0)
        high = min((x for x, (_, fits) in points.items() if not fits and x > low), default=bound + 1)
        if high == low + 1:
            break
        if low and points[low][0] > usable:  # it fits past the figure the secant aims with: gallop, then bisect
            first = min(x for x, (nbytes, fits) in points.items() if fits and nbytes > usable)
            value = (low + high) // 2 if high <= bound else min(low + max(low - first, 1), bound)
        else:
            value = min(max(_secant(points, order, usable), low + 1), high - 1)
    return points


def _secant(points: dict[int, tuple[int, bool]], order: list[int], usable: int) -> int:
    """Where the line through the two latest points crosses ``usable`` (rounded down); from one point
    that fits, the size scaled by ``usable`` over its bytes, from one that does not, the smallest (if
    that does not fit either, nothing does, in one trace); along a flat line, double or halve it."""
    last = order[-1]
    nbytes = {x: point[0] for x, point in points.items()}
    if len(order) == 1:
        return int(last * usable / max(nbytes[last], 1)) if points[last][1] else 1
    before = order[-2]
    slope = (nbytes[last] - nbytes[before]) / (last - before)
    if slope > 0:
        return int(last + (usable - nbytes[last]) // slope)
    return last * 2 if points[last][1] else last // 2
