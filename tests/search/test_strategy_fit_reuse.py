"""``fit --strategies``: the largest fit's first size is the search's own trace of the cheapest setting, not a
second one, and the answer is the one a second trace gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import transformers
from cli_runs import run, saved_config

import vramsim
from vramsim.search import strategy
from vramsim.tracer.mode import MemoryTracer

_ARGV = ["--seq-len", "64", "--device", "t4", "--gpus", "2", "--strategies", "--no-cache", "--json"]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per program run under the tracer."""
    counted: list[int] = []
    enter = MemoryTracer.__enter__

    def entered(tracer: MemoryTracer) -> MemoryTracer:
        counted.append(1)
        return enter(tracer)

    monkeypatch.setattr(MemoryTracer, "__enter__", entered)
    return counted


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not k.endswith("seconds")}
    return [_untimed(v) for v in value] if isinstance(value, list) else value


def test_the_largest_fit_reuses_the_search_trace_of_the_cheapest_setting(
    tiny_gpt2: transformers.GPT2Config,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = saved_config(tmp_path, tiny_gpt2)
    traces = _counted(monkeypatch)
    code, reused, err = run(capsys, "fit", model, *_ARGV)
    assert code == 0, err
    with_reuse = len(traces)
    with monkeypatch.context() as patched:  # no report handed over: the largest fit traces the asked size again
        patched.setattr(strategy, "cheapest_strategy_reported", lambda *a, **k: (strategy.cheapest_strategy(*a, **k), None))
        code, traced, err = run(capsys, "fit", model, *_ARGV)
    assert code == 0, err
    assert len(traces) - with_reuse == with_reuse + 1
    assert _untimed(json.loads(reused)) == _untimed(json.loads(traced))


def test_the_handed_report_is_the_one_simulate_traces(tiny_gpt2: transformers.GPT2Config) -> None:
    options: dict[str, Any] = {"seq_len": 64, "device": "t4", "gpus": 2}
    search, report = strategy.cheapest_strategy_reported(tiny_gpt2, cache=False, **options)
    assert report is not None
    again = vramsim.simulate(tiny_gpt2, cache=False, **options | search.options())
    assert _untimed(report.to_dict()) == _untimed(again.to_dict())
