"""Running the CLI in-process from tests: its exit code and what it printed, a config saved to a folder, the
traces a run makes and its answer without timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest
import transformers

from vramsim.cli import main
from vramsim.search import strategy
from vramsim.tracer.mode import MemoryTracer


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``vramsim *argv``: exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def saved_config(tmp_path: Path, config: transformers.PretrainedConfig) -> str:
    """``config`` saved as ``tmp_path/config.json``, a model path the CLI takes."""
    config.save_pretrained(tmp_path)
    return str(tmp_path / "config.json")


def count_traces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gains one entry per program run under the tracer (the one tracer behind every command)."""
    counted: list[int] = []
    enter = MemoryTracer.__enter__

    def entered(tracer: MemoryTracer) -> MemoryTracer:
        counted.append(1)
        return enter(tracer)

    monkeypatch.setattr(MemoryTracer, "__enter__", entered)
    return counted


class SearchedProgram(NamedTuple):
    """One program the strategy search traced: its GPU and parallel degrees."""

    device: str
    tp: int
    ep: int
    cp: int


def searched_programs(monkeypatch: pytest.MonkeyPatch) -> list[SearchedProgram]:
    """A list that gains one entry per program the strategy search traces (its own ``build_and_trace``)."""
    searched: list[SearchedProgram] = []
    build_and_trace = strategy.build_and_trace

    def recorded(model: Any, config: Any, target: Any, **kwargs: Any) -> Any:
        searched.append(SearchedProgram(target.profile.name, config.tp, config.ep, config.cp))
        return build_and_trace(model, config, target, **kwargs)

    monkeypatch.setattr(strategy, "build_and_trace", recorded)
    return searched


def untimed(value: Any) -> Any:
    """An answer's JSON data without the wall times in it (a trace made again takes another time)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith("seconds")}
    return [untimed(v) for v in value] if isinstance(value, list) else value
