"""Variants of one job side by side: one trace per distinct program, the what-ifs of its graph for the rest."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from vramsim.analysis.simulate import simulate_each
from vramsim.config import ANALYSIS_OPTIONS, AnalysisOptions
from vramsim.errors import ConfigError
from vramsim.results.compare import Compared, Comparison
from vramsim.workload.models import ModelSource, model_name, with_model_defaults

__all__ = ["compare", "programs"]

_ANALYSIS_DEFAULTS = {f.name: f.default for f in dataclasses.fields(AnalysisOptions) if f.default is not dataclasses.MISSING}
"""What an analysis option is when a variant does not set it."""


def compare(
    model: ModelSource,
    variants: Mapping[str, Mapping[str, Any]],
    *,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> Comparison:
    """Each variant's report (``vramsim.compare`` documents it); ``progress`` is told each trace after the first."""
    if len(variants) < 2:
        raise ConfigError(f"compare takes two or more variants, got {len(variants)}")
    given = {label: with_model_defaults(model, {**options, **variant}) for label, variant in variants.items()}
    started = time.perf_counter()
    compared: dict[str, Compared] = {}
    groups = programs(list(given.values()))
    for index, members in enumerate(groups):
        named = [list(given)[i] for i in members]
        if index and progress is not None:
            progress(f"tracing {model_name(model)}, program {index + 1} of {len(groups)}")
        reports = simulate_each(model, _what_ifs([given[label] for label in named]), advise=False, **given[named[0]])
        compared |= {label: Compared(label=label, trace=index, report=r) for label, r in zip(named, reports, strict=True)}
    return Comparison(
        model=model_name(model),
        variants=[compared[label] for label in given],
        traces=len(groups),
        trace_seconds=round(time.perf_counter() - started, 3),
    )


def programs(variants: list[dict[str, Any]]) -> list[list[int]]:
    """The variants grouped by the program they trace, in the order first given: two variants trace the same
    program when every option but the analysis ones (``ANALYSIS_OPTIONS``) is equal."""
    groups: list[tuple[dict[str, Any], list[int]]] = []
    for index, variant in enumerate(variants):
        program = {name: value for name, value in variant.items() if name not in ANALYSIS_OPTIONS}
        same = next((members for traced, members in groups if traced == program), None)
        if same is None:
            groups.append((program, [index]))
        else:
            same.append(index)
    return [members for _, members in groups]


def _what_ifs(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each variant's analysis options over the first one's trace, the default where another variant sets one
    it does not."""
    names = {name for variant in variants for name in variant if name in ANALYSIS_OPTIONS}
    return [{name: variant.get(name, _ANALYSIS_DEFAULTS[name]) for name in sorted(names)} for variant in variants]
