"""Serving deployments of one model side by side (``vramsim compare --serve``): each variant budgeted by ``serve``
itself, the traced runs shared where only the arithmetic over them differs."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from transformers import PretrainedConfig

from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.config.serving import ServeConfig
from vramsim.errors import ConfigError, EngineRefusedError, UnsupportedError
from vramsim.results.compare import ServeCompared, ServeComparison
from vramsim.serving.budget import serve
from vramsim.serving.traces import RankTraces

__all__ = ["compare_serve"]


def compare_serve(
    model: str | PretrainedConfig,
    variants: Mapping[str, Mapping[str, Any]],
    *,
    progress: Callable[[str], None] | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> ServeComparison:
    """Each variant's ``serve`` report over the shared ``options`` (``ServeConfig``'s fields), in the order given;
    a variant the engine would not start with (``EngineRefusedError``) is kept with the engine's reason.
    ``progress`` is told each variant after the first. ``cache`` as ``simulate`` takes it: the whole comparison
    is one entry of the result cache.

    >>> both = compare_serve("gpt2", {"bf16": {}, "fp8": {"kv_cache_dtype": "fp8"}}, device="h100")  # doctest: +SKIP
    >>> both.traces, both.variants[1].report.kv_cache_tokens > both.variants[0].report.kv_cache_tokens  # doctest: +SKIP
    (1, True)
    """
    if len(variants) < 2:
        raise ConfigError(f"compare takes two or more variants, got {len(variants)}")
    return cached_answer(
        cache,
        ServeComparison,
        lambda: _request_key(model, variants, options),
        lambda: _compared(model, variants, progress, options),
    )


def _request_key(model: str | PretrainedConfig, variants: Mapping[str, Mapping[str, Any]], options: dict[str, Any]) -> str | None:
    """The comparison's key: each variant's deployment as ``serve`` folds it, by label; ``None`` where one does not
    fold, which the comparison itself then refuses, naming the variant."""
    try:
        deployments = [ServeConfig(**{**options, **variant}) for variant in variants.values()]
    except (ConfigError, UnsupportedError, TypeError):
        return None
    return request_key("compare_serve", model, deployments, labels=list(variants))


def _compared(
    model: str | PretrainedConfig,
    variants: Mapping[str, Mapping[str, Any]],
    progress: Callable[[str], None] | None,
    options: dict[str, Any],
) -> ServeComparison:
    """``compare_serve``'s answer: each variant budgeted, the traced runs shared."""
    name = model if isinstance(model, str) else (getattr(model, "name_or_path", "") or type(model).__name__)
    started = time.perf_counter()
    traces = RankTraces()
    compared = []
    for index, (label, variant) in enumerate(variants.items()):
        if index and progress is not None:
            progress(f"budgeting {name}, variant {index + 1} of {len(variants)}")
        try:
            compared.append(ServeCompared(label=label, report=serve(model, traces=traces, cache=False, **{**options, **variant})))
        except EngineRefusedError as refused:
            compared.append(ServeCompared(label=label, report=None, refused=str(refused)))
        except (ConfigError, UnsupportedError) as exc:  # the variant's values; a model not found is every variant's
            named = f"variant {label!r}" if label else "the empty variant"
            raise type(exc)(f"{named}: {exc.own}", quoted=exc.quoted) from None
    return ServeComparison(
        model=name, variants=compared, traces=traces.traced, trace_seconds=round(time.perf_counter() - started, 3)
    )
