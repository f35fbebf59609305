"""Progress on a stderr that is no terminal (a line per stage once the command has run a few seconds; none with
--quiet), and the trace footer's wall time and trace count of the whole command."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
import transformers
from cli_runs import run, saved_config

import vramsim.cli.output as output
from vramsim.cli.output import Progress


def test_stages_are_shown_once_the_delay_has_passed() -> None:
    """Before the delay nothing is shown; then the stage under way, then each stage as it is told; all counted."""
    shown: list[str] = []
    started = threading.Event()

    def show(line: str) -> None:
        shown.append(line)
        started.set()

    told = Progress("tracing gpt2", show, delay=0.2)
    told("tracing with --dtype bf16")
    assert shown == []
    assert started.wait(10)
    told("tracing with --optimizer adafactor")
    told.stop()
    told("tracing batch_size=2 seq_len=16")  # after stop: counted, not shown
    assert shown == ["tracing with --dtype bf16", "tracing with --optimizer adafactor"] and told.stages == 3


def test_without_a_delay_the_first_stage_is_shown_at_once() -> None:
    shown: list[str] = []
    Progress("tracing gpt2", shown.append)
    assert shown == ["tracing gpt2"]


def test_a_long_command_says_what_it_does_on_a_pipe(
    tmp_path: Path, tiny_gpt2: transformers.GPT2Config, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stderr here is no terminal: past the delay (0 s here) a line per stage; --quiet, none. The footer gives the
    whole command's seconds (at least the trace's own) and its traces, 1 here."""
    monkeypatch.setattr(output, "PROGRESS_LINES_AFTER", 0.0)
    model = saved_config(tmp_path, tiny_gpt2)
    code, out, err = run(capsys, "trace", model, "--seq-len", "16", "--device", "cpu", "--quick")
    assert code == 0 and err == f"vramsim: tracing {model} ...\n"
    footer = out.rstrip().splitlines()[-1]
    found = re.fullmatch(r"(\d+\.\d) s in all, 1 trace", footer)
    assert found is not None, footer
    code, _, err = run(capsys, "trace", model, "--seq-len", "16", "--device", "cpu", "--quiet", "--json")
    assert code == 0 and err == ""


def test_the_footer_counts_every_trace_the_command_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that does not fit is re-traced for its advice: the footer counts those traces too (one per stage
    line after the first), where the old footer gave the first trace's seconds alone."""
    monkeypatch.setattr(output, "PROGRESS_LINES_AFTER", 0.0)
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=512, max_position_embeddings=256,
    )  # fmt: skip
    argv = ["trace", saved_config(tmp_path, config), "--seq-len", "128", "--batch-size", "64"]
    code, out, err = run(capsys, *argv, "--device", "custom:0.8GiB:sm_80")
    stages = err.splitlines()
    assert code == 0 and "DOES NOT FIT" in out and len(stages) > 2
    assert all(line.startswith("vramsim: tracing ") for line in stages)
    assert out.rstrip().splitlines()[-1].endswith(f"s in all, {len(stages)} traces")
