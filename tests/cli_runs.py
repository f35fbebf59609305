"""Running the CLI in-process from tests: its exit code and what it printed, and a config saved to a folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from vramsim.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``vramsim *argv``: exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def saved_config(tmp_path: Path, config: transformers.PretrainedConfig) -> str:
    """``config`` saved as ``tmp_path/config.json``, a model path the CLI takes."""
    config.save_pretrained(tmp_path)
    return str(tmp_path / "config.json")
