"""``fit --strategies``: the largest fit's first size is the search's own trace of the cheapest setting, not a
second one, and the answer is the one a second trace gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import transformers
from cli_runs import count_traces, run, saved_config, untimed

import vramsim
from vramsim.search import strategy

_ARGV = ["--seq-len", "64", "--device", "t4", "--gpus", "2", "--strategies", "--no-cache", "--json"]


def test_the_largest_fit_reuses_the_search_trace_of_the_cheapest_setting(
    tiny_gpt2: transformers.GPT2Config,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = saved_config(tmp_path, tiny_gpt2)
    traces = count_traces(monkeypatch)
    code, reused, err = run(capsys, "fit", model, *_ARGV)
    assert code == 0, err
    with_reuse = len(traces)
    with monkeypatch.context() as patched:  # no report handed over: the largest fit traces the asked size again
        patched.setattr(strategy, "cheapest_strategy_reported", lambda *a, **k: (strategy.cheapest_strategy(*a, **k), None))
        code, traced, err = run(capsys, "fit", model, *_ARGV)
    assert code == 0, err
    assert len(traces) - with_reuse == with_reuse + 1
    assert untimed(json.loads(reused)) == untimed(json.loads(traced))


def test_the_handed_report_is_the_one_simulate_traces(tiny_gpt2: transformers.GPT2Config) -> None:
    options: dict[str, Any] = {"seq_len": 64, "device": "t4", "gpus": 2}
    search, report = strategy.cheapest_strategy_reported(tiny_gpt2, cache=False, **options)
    assert report is not None
    again = vramsim.simulate(tiny_gpt2, cache=False, **options | search.options())
    assert untimed(report.to_dict()) == untimed(again.to_dict())
