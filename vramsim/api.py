"""The public entry points: ``simulate``, ``simulate_each``, ``compare``, ``inspect`` and ``count_parameters``, and
the advice they give.

``simulate`` is the analysis stage's, plus the advice that needs more traces (``advice="traced"``), which
``vramsim trace`` asks for too: a job gets the same advice from Python and from the command line. Its answers
are kept in the result cache (``vramsim/cache/``): the same request again is answered without a trace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

from vramsim.analysis import compare as comparing
from vramsim.analysis import simulate as analysis
from vramsim.analysis.inspection import inspect_model
from vramsim.analysis.simulate import count_parameters
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.errors import ConfigError
from vramsim.results.compare import Comparison
from vramsim.results.inspect import Inspection
from vramsim.results.report import Report
from vramsim.search.advice import traced_advice
from vramsim.workload.models import ModelSource, with_default_task

__all__ = ["ADVICE", "compare", "count_parameters", "inspect", "simulate", "simulate_each"]

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
    options = with_default_task(model, options)
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


def inspect(model: ModelSource, *, depth: int | None = None, graph: bool = False, **options: Any) -> Inspection:
    """Trace one workload, as ``simulate`` takes it, and read its memory by module: the module tree to ``depth``
    levels below the model (``None``: down to the repeated block, the per-layer table's rows) with each module's
    parameters, weight bytes, saved activations (training; in inference, what it allocated that is live at the
    peak) and own peak, the largest temporaries, and what is live at the peak by the op and module that allocated
    it. With ``graph``, ``Inspection.graph`` holds the op/storage graph for ``vramsim.write_graph``.

    >>> inspection = inspect("gpt2", seq_len=16, device="cpu")
    >>> inspection.tree.parameters
    124439808
    """
    return inspect_model(model, depth=depth, graph=graph, **with_default_task(model, options))


def compare(
    model: ModelSource,
    variants: Mapping[str, Mapping[str, Any]],
    *,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> Comparison:
    """Two or more variants of one job side by side: ``variants`` maps each label to the options it sets over the
    shared ``options`` (``simulate``'s keywords). Variants that differ only in ``ANALYSIS_OPTIONS`` (checkpointing,
    data and pipeline parallelism, headroom...) share one trace, as in ``simulate_each``; each other program is
    traced once. Each report has the figures ``simulate`` gives for its options, without advice (``advice="none"``);
    ``progress`` is told each trace after the first.

    >>> both = compare("gpt2", {"fp32": {"dtype": "fp32"}, "bf16": {"dtype": "bf16"}}, task="forward", seq_len=16)
    >>> both.traces, both.variants[0].report.peak_bytes > both.variants[1].report.peak_bytes
    (2, True)
    """
    return comparing.compare(model, variants, progress=progress, **options)
