"""The same question is traced once: ``simulate`` and ``vramsim trace`` answer a repeated request from the cache."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import transformers
from cli_runs import run, saved_config, searched_programs

import vramsim
from vramsim.analysis import simulate as analysis
from vramsim.errors import CacheWarning

OPTIONS = {"task": "train", "seq_len": 16, "device": "cpu"}


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each trace the analysis runs, by model name (the one place a program is traced for a report)."""
    traced: list[str] = []
    trace_workload = analysis.trace_workload

    def counted(model: object, *args: object, **kwargs: object) -> object:
        traced.append(str(model))
        return trace_workload(model, *args, **kwargs)

    monkeypatch.setattr(analysis, "trace_workload", counted)
    return traced


def _entries(cache_home: Path) -> list[Path]:
    return sorted((cache_home / "vramsim").rglob("*.json.gz"))


def test_simulate_twice_traces_once(tiny_gpt2: transformers.GPT2Config, traces: list[str], cache_home: Path) -> None:
    first = vramsim.simulate(tiny_gpt2, **OPTIONS)
    again = vramsim.simulate(tiny_gpt2, **OPTIONS, batch_size=1)  # the default, spelled out: the same request
    assert again == first and len(traces) == 1 and len(_entries(cache_home)) == 1
    retraced = vramsim.simulate(tiny_gpt2, **OPTIONS, cache=False)
    assert dataclasses.replace(retraced, trace_seconds=first.trace_seconds) == first and len(traces) == 2
    assert vramsim.simulate(tiny_gpt2, **{**OPTIONS, "seq_len": 32}).peak_bytes > first.peak_bytes and len(traces) == 3


def test_a_corrupted_entry_warns_and_is_traced_again(
    tiny_gpt2: transformers.GPT2Config, traces: list[str], cache_home: Path
) -> None:
    first = vramsim.simulate(tiny_gpt2, **OPTIONS)
    (entry,) = _entries(cache_home)
    entry.write_bytes(entry.read_bytes()[:100])  # cut short, as a full disk or a killed write would leave it
    with pytest.warns(CacheWarning, match="ignored the result cache entry .*unreadable"):
        retraced = vramsim.simulate(tiny_gpt2, **OPTIONS)
    assert len(traces) == 2 and retraced.peak_bytes == first.peak_bytes
    assert vramsim.simulate(tiny_gpt2, **OPTIONS) == retraced and len(traces) == 2  # the trace replaced the entry


def test_trace_answers_a_repeated_command_from_the_cache(
    tiny_gpt2: transformers.GPT2Config,
    traces: list[str],
    cache_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's 'done when': a second identical ``vramsim trace`` answers from the cache, its report the same."""
    model = saved_config(tmp_path, tiny_gpt2)
    command = ("trace", model, "--seq-len", "16", "--device", "cpu")
    code, first, _ = run(capsys, *command)
    assert code == 0 and len(traces) == 1 and "1 trace" in first.splitlines()[-1]
    code, again, _ = run(capsys, *command)
    assert code == 0 and len(traces) == 1
    assert again.splitlines()[-1].endswith("s in all, answered from the result cache")
    assert again.splitlines()[:-1] == first.splitlines()[:-1]
    code, cached, _ = run(capsys, *command, "--json")  # how the answer is shown is not part of the request
    assert code == 0 and len(traces) == 1 and len(_entries(cache_home)) == 1
    code, traced, _ = run(capsys, *command, "--json", "--no-cache")
    assert code == 0 and len(traces) == 2
    assert {**json.loads(cached), "trace_seconds": 0} == {**json.loads(traced), "trace_seconds": 0}


def test_no_cache_traces(
    tiny_gpt2: transformers.GPT2Config, traces: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = saved_config(tmp_path, tiny_gpt2)
    for _ in range(2):
        code, out, _ = run(capsys, "trace", model, "--seq-len", "16", "--device", "cpu", "--no-cache")
        assert code == 0 and out.splitlines()[-1].endswith("s in all, 1 trace")
    assert len(traces) == 2


@pytest.mark.filterwarnings("default::vramsim.errors.CacheWarning")
def test_trace_warns_of_a_foreign_entry_in_one_line(
    tiny_gpt2: transformers.GPT2Config,
    traces: list[str],
    cache_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = saved_config(tmp_path, tiny_gpt2)
    command = ("trace", model, "--seq-len", "16", "--device", "cpu", "--json")
    run(capsys, *command)
    (entry,) = _entries(cache_home)
    entry.write_bytes(b"written by something else")
    code, _, err = run(capsys, *command)
    assert code == 0 and len(traces) == 2
    assert err == f"vramsim: warning: ignored the result cache entry {entry}: unreadable (BadGzipFile); tracing again\n"


def test_largest_fit_again_searches_nothing(tiny_gpt2: transformers.GPT2Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """``vramsim fit``'s search is one request: repeated, no size is traced again."""
    from vramsim.search import fitting

    sizes: list[object] = []
    simulate = fitting.simulate

    def counted(model: object, **options: object) -> object:
        sizes.append(options["seq_len"])
        return simulate(model, **options)

    monkeypatch.setattr(fitting, "simulate", counted)
    first = vramsim.largest_fit(tiny_gpt2, sizes=("seq_len",), task="train", seq_len=64, device="rtx-4090")
    searched = len(sizes)
    assert searched >= 1 and first.seq_len is not None
    assert vramsim.largest_fit(tiny_gpt2, sizes=("seq_len",), task="train", seq_len=64, device="rtx-4090") == first
    assert len(sizes) == searched


PLAN_SHEET = """
currency = "EUR"

[[offer]]
name = "small"
provider = "Cloud C"
gpu = "custom:2GiB:sm_86"
gpus_per_node = 1
nodes = 1
interconnect = "pcie"
price = { day = 5.00 }
"""


def test_plan_answers_a_repeated_request_from_the_cache(
    tiny_llama: transformers.LlamaConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_home: Path
) -> None:
    """The issue's words: a second identical plan returns the same key from the cache without tracing; another
    duration is another request."""
    traced = searched_programs(monkeypatch)
    sheet = tmp_path / "prices.toml"
    sheet.write_text(PLAN_SHEET, encoding="utf-8")
    first = vramsim.plan(tiny_llama, prices=sheet, days=1, task="train", seq_len=16)
    assert first.rows and traced
    searched = len(traced)
    again = vramsim.plan(tiny_llama, prices=sheet, days=1, task="train", seq_len=16)
    assert again == first and again.key == first.key and len(traced) == searched
    longer = vramsim.plan(tiny_llama, prices=sheet, days=2, task="train", seq_len=16)
    assert longer.key != first.key and longer.rows[0].quote.total == 2 * first.rows[0].quote.total
