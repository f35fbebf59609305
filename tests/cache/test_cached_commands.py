"""Every command that answers from a trace keeps its answer: a second identical run traces nothing and prints the
same, a changed option is another request, and an entry that cannot be trusted is said in one line and traced again.

A trace is counted where every one happens: each program run under ``MemoryTracer`` (the one tracer behind
``simulate``, ``serve``'s cache probes and profile run, ``checkpoint``, ``inspect`` and the strategy search).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import transformers
from cli_runs import count_traces, run, saved_config, untimed

from vramsim.cli.output import ANSWERED_FROM_CACHE

SERVE = ["--device", "rtx-4090", "--max-model-len", "64", "--max-num-batched-tokens", "64"]
JOB = ["--seq-len", "16", "--device", "cpu"]

CASES = {
    "serve": (["serve", "{model}", *SERVE, "--json"], ["--max-num-batched-tokens", "32"]),
    "compare": (["compare", "{model}", *JOB, "--json", "--", "", "--dtype bf16"], ["--seq-len", "32"]),
    "compare --serve": (
        ["compare", "{model}", "--serve", *SERVE, "--json", "--", "", "--kv-cache-dtype fp8"],
        ["--max-num-batched-tokens", "32"],
    ),
    "inspect": (["inspect", "{model}", *JOB, "--json"], ["--depth", "1"]),
    "checkpoint": (["checkpoint", "{model}", *JOB, "--json"], ["--save-format", "torch"]),
    "fit --strategies": (
        ["fit", "{model}", "--seq-len", "64", "--device", "t4", "--gpus", "2", "--strategies", "--json"],
        ["--gpus", "4"],
    ),
    "fit --device any": (["fit", "{model}", "--seq-len", "16", "--json"], ["--batch-size", "64"]),
    "sweep": (
        ["sweep", "{model}", "--batch-size", "1,2", "--seq-len", "16,32", "--device", "h100", "--jobs", "1", "--json", "--quiet"],
        ["--seq-len", "16,48"],
    ),
}
"""Each command on a tiny GPT-2 (``--json``, so that the two answers compare as text), and an option that changes
its request: one the trace reads (a length, tokens per batch, GPUs, a batch, a sweep's lengths), or one only its
analysis reads (the depth of the module tree, the save format); each changes the answer apart from its timings."""


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per program run under the tracer."""
    return count_traces(monkeypatch)


def _argv(case: str, model: str) -> tuple[list[str], list[str]]:
    argv, changed = CASES[case]
    return [model if word == "{model}" else word for word in argv], changed


def _with(argv: list[str], *flags: str) -> list[str]:
    """``argv`` with further flags, before compare's variants."""
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], *flags, *argv[cut:]]


def _entries(cache_home: Path) -> list[Path]:
    return sorted((cache_home / "vramsim").rglob("*.json.gz"))


@pytest.mark.parametrize("case", list(CASES))
def test_a_second_identical_run_traces_nothing(
    case: str,
    tiny_gpt2: transformers.GPT2Config,
    traces: list[int],
    cache_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv, changed = _argv(case, saved_config(tmp_path, tiny_gpt2))
    code, first, err = run(capsys, *argv)
    assert code == 0, err
    traced = len(traces)
    assert traced >= 1 and _entries(cache_home) and ANSWERED_FROM_CACHE not in err
    code, again, err = run(capsys, *argv)
    assert code == 0 and len(traces) == traced, err
    assert again == first and err == f"vramsim: {ANSWERED_FROM_CACHE}\n"
    code, _, err = run(capsys, *_with(argv, "--no-cache"))
    assert code == 0 and len(traces) == 2 * traced and ANSWERED_FROM_CACHE not in err
    code, other, err = run(capsys, *_with(argv, *changed))
    assert code == 0 and len(traces) > 2 * traced and ANSWERED_FROM_CACHE not in err, err
    assert _untimed(other) != _untimed(first)


@pytest.mark.filterwarnings("default::vramsim.errors.CacheWarning")
@pytest.mark.parametrize("case", list(CASES))
def test_an_entry_not_to_be_trusted_is_one_line_and_traced_again(
    case: str,
    tiny_gpt2: transformers.GPT2Config,
    traces: list[int],
    cache_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each entry cut short (a killed write) or overwritten (another program's file) is ignored, one warning line
    each; the command traces again, prints the same figures, and keeps the new answer."""
    argv, _ = _argv(case, saved_config(tmp_path, tiny_gpt2))
    code, first, err = run(capsys, *argv)
    assert code == 0, err
    traced, entries = len(traces), _entries(cache_home)
    for damage in (lambda data: data[:40], lambda _: b"written by something else"):
        for entry in entries:
            entry.write_bytes(damage(entry.read_bytes()))
        before = len(traces)
        code, again, err = run(capsys, *argv)
        assert code == 0 and len(traces) == before + traced and _untimed(again) == _untimed(first)
        lines = err.splitlines()
        assert len(lines) == len(entries) and all(
            line.startswith("vramsim: warning: ignored the result cache entry ") and line.endswith("; tracing again")
            for line in lines
        ), err
        code, kept, err = run(capsys, *argv)
        assert code == 0 and kept == again and len(traces) == before + traced and err == f"vramsim: {ANSWERED_FROM_CACHE}\n"


def _untimed(text: str) -> Any:
    """A command's JSON answer without the wall times in it."""
    return untimed(json.loads(text))
