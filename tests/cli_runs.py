"""Running the CLI in-process from tests: its exit code and what it printed, a config saved to a folder, the
traces a run makes and its answer without timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import transformers

from vramsim.cli import main
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


def untimed(value: Any) -> Any:
    """An answer's JSON data without the wall times in it (a trace made again takes another time)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith("seconds")}
    return [untimed(v) for v in value] if isinstance(value, list) else value
