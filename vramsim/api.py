"""The public entry points: ``simulate``, ``simulate_each``, ``compare``, ``inspect`` and ``count_parameters``, and
the advice they give.

``simulate`` is the analysis stage's, plus the advice that needs more traces (``advice="traced"``), which
``vramsim trace`` asks for too: a job gets the same advice from Python and from the command line. Its answers
are kept in the result cache (``vramsim/cache/``): the same request again is answered without a trace.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from vramsim.analysis import compare as comparing
from vramsim.analysis import simulate as analysis
from vramsim.analysis.inspection import inspect_model
from vramsim.analysis.simulate import count_parameters
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.errors import ConfigError
from vramsim.pricing import Offer, PriceSheet, given_duration, load_sheet, quote, step_flops, training_duration
from vramsim.pricing.key import order_key, plan_key
from vramsim.results.compare import Comparison
from vramsim.results.inspect import Inspection
from vramsim.results.plan import Plan, PlanRow
from vramsim.results.quote import Duration, StepFlops
from vramsim.results.report import Report
from vramsim.search.advice import traced_advice
from vramsim.search.strategy import SharedTraces, StrategySearcher, strategy_searcher
from vramsim.search.strategy_advice import strategy_advice
from vramsim.workload.models import ModelSource, with_model_defaults

__all__ = ["ADVICE", "compare", "count_parameters", "inspect", "plan", "simulate", "simulate_each"]

AdviceDepth = Literal["none", "graph", "traced"]
ADVICE: tuple[str, ...] = get_args(AdviceDepth)
"""How much advice a job that does not fit gets: ``none``; ``graph``, what-ifs over its own trace (checkpointing,
sharding: no further trace); ``traced``, those and the changes measured by more traces (weights' dtype,
optimizer, the largest batch size and sequence length), as ``vramsim trace`` gives unless ``--quick``."""


def simulate(
    model: ModelSource,
    *,
    advice: AdviceDepth = "graph",
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> Report:
    """Trace one workload on the meta device and report its steady-state peak on ``device``.

    ``options`` are keyword-only and are ``SimulationConfig``'s fields, each documented there
    (``task``, ``batch_size``, ``seq_len``, ``device``, ``dtype``, ``mixed_precision``,
    ``optimizer``, ``checkpointing``, ``gpus``, ``zero``, ``fsdp``, ``tp``, ``pp``, ``lora``, ``inputs``,
    ``loss``...); an unknown one is a ``ConfigError`` naming the choices. ``advice`` is one of ``ADVICE``;
    ``progress`` is told each further trace the advice makes. ``cache``: True, the result cache at
    ``$XDG_CACHE_HOME/vramsim`` answers a request it has seen (and keeps this one); False, always trace; or a
    ``vramsim.cache.ResultCache`` of your own.

    >>> report = simulate("meta-llama/Llama-3.2-1B", task="forward", seq_len=128, device="cpu")
    >>> report.peak_bytes > 0
    True
    """
    return simulate_each(model, [{}], advice=advice, progress=progress, cache=cache, **options)[0]


def simulate_each(
    model: ModelSource,
    variants: list[dict[str, Any]],
    *,
    advice: AdviceDepth = "graph",
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> list[Report]:
    """One trace, one report per variant: each variant overrides ``ANALYSIS_OPTIONS`` (checkpointing,
    data and pipeline parallelism, headroom, expandable segments), which are what-ifs over the traced graph
    (``tp`` changes the traced program, so it is fixed across variants). ``advice="none"`` leaves each
    report's ``advice`` empty: its entries are further what-ifs for every variant that does not fit, which
    a sweep reading only the figures does not need (they are most of its time). ``cache`` as in ``simulate``:
    the whole request (every variant, the advice) is one entry.

    >>> reports = simulate_each("gpt2", [{"gpus": 8, "zero": 1}, {"gpus": 8, "fsdp": "full"}], seq_len=16, device="cpu")
    >>> reports[0].peak_bytes > reports[1].peak_bytes
    True
    """
    if advice not in ADVICE:
        raise ConfigError(f"unknown advice {advice!r}; choose one of: {', '.join(ADVICE)}")
    options = with_model_defaults(model, options)
    return cached_answer(
        cache,
        list[Report],
        lambda: request_key("simulate", model, options, variants=variants, advice=advice),
        lambda: _traced_reports(model, variants, advice, progress, options),
    )


def _traced_reports(
    model: ModelSource,
    variants: list[dict[str, Any]],
    advice: AdviceDepth,
    progress: Callable[[str], None] | None,
    options: dict[str, Any],
) -> list[Report]:
    """``simulate_each``'s answer, traced."""
    reports = analysis.simulate_each(model, variants, advise=advice != "none", **options)
    if advice != "traced":
        return reports
    return [
        dataclasses.replace(report, advice=[*report.advice, *traced_advice(model, report, options | variant, progress=progress)])
        if report.fits is False
        else report
        for report, variant in zip(reports, variants, strict=True)
    ]


def inspect(
    model: ModelSource,
    *,
    depth: int | None = None,
    graph: bool = False,
    cache: bool | ResultCache = True,
    **options: Any,
) -> Inspection:
    """Trace one workload, as ``simulate`` takes it, and read its memory by module: the module tree to ``depth``
    levels below the model (``None``: down to the repeated block, the per-layer table's rows) with each module's
    parameters, weight bytes, saved activations (training; in inference, what it allocated that is live at the
    peak) and own peak, the largest temporaries, and what is live at the peak by the op and module that allocated
    it. With ``graph``, ``Inspection.graph`` holds the op/storage graph for ``vramsim.write_graph``. ``cache`` as
    in ``simulate``.

    >>> inspection = inspect("gpt2", seq_len=16, device="cpu")
    >>> inspection.tree.parameters
    124439808
    """
    options = with_model_defaults(model, options)
    return cached_answer(
        cache,
        Inspection,
        lambda: request_key("inspect", model, options, depth=depth, graph=graph),
        lambda: inspect_model(model, depth=depth, graph=graph, **options),
    )


def compare(
    model: ModelSource,
    variants: Mapping[str, Mapping[str, Any]],
    *,
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> Comparison:
    """Two or more variants of one job side by side: ``variants`` maps each label to the options it sets over the
    shared ``options`` (``simulate``'s keywords). Variants that differ only in ``ANALYSIS_OPTIONS`` (checkpointing,
    data and pipeline parallelism, headroom...) share one trace, as in ``simulate_each``; each other program is
    traced once. Each report has the figures ``simulate`` gives for its options, without advice (``advice="none"``);
    ``progress`` is told each trace after the first. ``cache`` as in ``simulate``: the whole comparison is one entry.

    >>> both = compare("gpt2", {"fp32": {"dtype": "fp32"}, "bf16": {"dtype": "bf16"}}, task="forward", seq_len=16)
    >>> both.traces, both.variants[0].report.peak_bytes > both.variants[1].report.peak_bytes
    (2, True)
    """
    given = [with_model_defaults(model, {**options, **variant}) for variant in variants.values()]
    return cached_answer(
        cache,
        Comparison,
        lambda: request_key("compare", model, given, labels=list(variants)),
        lambda: comparing.compare(model, variants, progress=progress, **options),
    )


_PLAN_CHOSEN = ("device", "gpus", "tp", "pp", "cp", "ep", "zero", "fsdp", "pp_schedule", "checkpointing")
"""Options ``plan`` sets itself: the device and GPU count from each offer, the rest by the strategy search."""


def plan(
    model: ModelSource,
    *,
    prices: str | Path | PriceSheet,
    tokens: int | None = None,
    days: float | None = None,
    hours: float | None = None,
    mfu: float | None = None,
    max_gpus: int | None = None,
    stop_after_hours: float | None = None,
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> Plan:
    """Every offer of the price sheet ``prices`` weighed for ``model``'s training job (``simulate``'s options, less
    the device and the layout): on each GPU count the offer has (1, 2, 4, ... and all of them), the strategy
    search's cheapest setting that fits each rank under the headroom, then its quote over ``days`` or ``hours``, or
    over the time ``tokens`` of training take there (the setting's traced step FLOPs at the GPU's peak times
    ``mfu``). Rows cheapest first; offers of GPUs alike but for their memory share their traces (``SharedTraces``),
    and a GPU count that cannot hold the job at any sharding is ruled out untraced; ``max_gpus`` caps the counts an
    order may have; ``stop_after_hours`` adds to each quote what is paid anyway if the job stops then (a row whose
    job ends before it has none). When nothing fits, ``Plan.advice`` says what would. The same request
    (``Plan.key``, with the versions that trace) is answered from the result cache (``cache`` as ``simulate`` takes
    it).

    >>> found = plan("gpt2", prices="examples/prices.example.toml", days=1, seq_len=128)
    >>> found.cheapest.quote.offer, len(found.key)
    ('example-a100-pcie', 64)
    """
    given = [name for name in _PLAN_CHOSEN if name in options]
    if given:
        raise ConfigError(
            f"plan takes the GPUs from the price sheet's offers and the layout from the strategy search; "
            f"give no {', '.join(given)}"
        )
    if sum(value is not None for value in (tokens, days, hours)) != 1:
        raise ConfigError("a plan's duration is one of: tokens (training tokens), days or hours")
    if max_gpus is not None and (isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1):
        raise ConfigError(f"max_gpus is the most GPUs an order may have, 1 or more; got {max_gpus!r}")
    if mfu is not None and tokens is None:
        raise ConfigError("mfu is the utilisation a duration from tokens assumes; give tokens, or drop mfu")
    if stop_after_hours is not None:
        stop = given_duration(hours=stop_after_hours)
        if tokens is None and stop.seconds > given_duration(days=days or 0, hours=hours or 0).seconds:
            raise ConfigError(f"stop_after_hours is within the job; {stop_after_hours:g} hours is past its end")
    sheet = prices if isinstance(prices, PriceSheet) else load_sheet(prices)
    options = with_model_defaults(model, options)
    inputs = {
        "tokens": tokens,
        "days": days,
        "hours": hours,
        "mfu": mfu,
        "max_gpus": max_gpus,
        "stop_after_hours": stop_after_hours,
    }
    key = plan_key(model, options, sheet, inputs)
    return cached_answer(
        cache,
        Plan,
        lambda: request_key("plan", model, options, plan=key),
        lambda: _planned(model, sheet, options, inputs, key, progress),
    )


def _planned(
    model: ModelSource,
    sheet: PriceSheet,
    options: dict[str, Any],
    inputs: dict[str, Any],
    key: str,
    progress: Callable[[str], None] | None,
) -> Plan:
    """``plan``'s answer, searched and quoted (what the result cache keeps under the request's key)."""
    tokens, days, hours, mfu, max_gpus = (inputs[name] for name in ("tokens", "days", "hours", "mfu", "max_gpus"))
    fixed = None if tokens is not None else given_duration(days=days or 0, hours=hours or 0)
    stop = None if inputs["stop_after_hours"] is None else given_duration(hours=inputs["stop_after_hours"])
    started = time.perf_counter()
    shared = SharedTraces()  # a program traced once for every GPU alike but for its memory
    searchers: dict[str, StrategySearcher] = {}
    rows: list[tuple[int, PlanRow]] = []
    unfit = []
    for index, offer in enumerate(sheet.offers):
        if offer.device.name not in searchers:  # one GPU model, one search: its candidates serve every offer of it
            searchers[offer.device.name] = strategy_searcher(model, progress=progress, shared=shared, device=offer.gpu, **options)
        searcher = searchers[offer.device.name]
        found = [
            _plan_row(searcher, offer, gpus, key, tokens, fixed, mfu, stop)
            for gpus in _plan_counts(min(offer.gpus_available, max_gpus or offer.gpus_available))
        ]
        rows += [(index, row) for row in found if row is not None]
        if all(row is None for row in found):
            unfit.append(offer.name)
    rows.sort(key=lambda item: (item[1].quote.total, item[1].quote.duration.seconds, item[1].quote.gpus, item[0]))
    advised = None if rows else max(sheet.offers, key=lambda o: o.gpus_available * (o.device.memory_bytes or 0))
    advice, advice_traces = (
        ([], 0)
        if advised is None
        else strategy_advice(
            searchers[advised.device.name],
            min(advised.gpus_available, max_gpus or advised.gpus_available),
            advised.gpus_per_node,
            progress=progress,
        )
    )
    return Plan(
        model=searchers[sheet.offers[0].device.name].model_name,
        sheet=sheet.source,
        currency=sheet.currency,
        duration=inputs,
        headroom=next(iter(searchers.values())).config.headroom,
        rows=[row for _, row in rows],
        unfit=unfit,
        advice=advice,
        advice_offer=None if advised is None else advised.name,
        key=key,
        traces=len(shared) + advice_traces,
        trace_seconds=round(time.perf_counter() - started, 3),
    )


def _plan_counts(available: int) -> list[int]:
    """The GPU counts an offer of ``available`` GPUs is weighed on: 1, 2, 4, ... and all of them, as the search's."""
    return sorted({*(1 << i for i in range(available.bit_length())), available})


def _plan_row(
    searcher: StrategySearcher,
    offer: Offer,
    gpus: int,
    key: str,
    tokens: int | None,
    fixed: Duration | None,
    mfu: float | None,
    stop: Duration | None,
) -> PlanRow | None:
    """``gpus`` of ``offer``: the cheapest setting that fits and its quote (with what stopping after ``stop`` pays,
    where the job runs that long); None when none fits."""
    setting = searcher.cheapest(gpus, offer.gpus_per_node)
    if setting is None:
        return None
    duration = fixed
    if duration is None:
        assert tokens is not None, "a plan's duration is fixed or from tokens"
        config = searcher.config
        graph, recompute = searcher.rank_step(setting)
        rank = step_flops(graph, config.batch_size * config.seq_len * config.grad_accum, recompute=recompute)
        share = setting.tp * setting.cp  # the ranks that run one step between them, each a share of it
        whole = StepFlops(
            forward=rank.forward * share, backward=rank.backward * share, recompute=rank.recompute * share, tokens=rank.tokens
        )
        duration = training_duration(whole, tokens, offer, gpus=gpus, dtype=searcher.compute_dtype, mfu=mfu)
    capacity = searcher.target.profile.memory_bytes
    assert capacity is not None, "an offer's GPU has a capacity"
    stop_after = stop if stop is not None and stop.seconds <= duration.seconds else None
    bill = dataclasses.replace(quote(offer, gpus, duration, stop_after), key=order_key(key, offer.name, gpus))
    return PlanRow(setting=setting, capacity_bytes=capacity, usable_bytes=searcher.usable, quote=bill)
