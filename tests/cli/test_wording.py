"""The command line's words: its version, suggestions a shell can pass, and vramsim's words reworded as flags
while the text an error quotes from the user's code or model is printed as it came."""

from __future__ import annotations

import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_runs import run

from vramsim.cli.wording import cli_message, in_cli_words
from vramsim.errors import ConfigError, TraceError

USER_FILE = textwrap.dedent(
    """
    import torch

    def build():
        return torch.nn.Linear(8, 4)

    def inputs(batch_size, seq_len):
        raise ValueError("expected dtype=torch.long, seq_len=4 for the ids")
    """
)


def test_version_is_the_installed_package_s(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        run(capsys, "--version")
    assert exit.value.code == 0 and capsys.readouterr().out == f"vramsim {version('vramsim')}\n"


def test_a_model_without_config_is_told_to_pass_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The API's ``inputs=lambda ...`` is no argument a shell can pass: the command line names a file's function."""
    path = tmp_path / "mynet.py"
    path.write_text(USER_FILE)
    code, out, err = run(capsys, "trace", f"{path}:build", "--device", "cpu")
    assert (code, out) == (1, "")
    assert "pass --inputs path/to/file.py:function (def function(batch_size, seq_len)" in err and "lambda" not in err


def test_the_user_s_own_words_are_not_reworded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Their exception says ``dtype=torch.long``: it is quoted as it is, not turned into ``--dtype torch.long``."""
    path = tmp_path / "mynet.py"
    path.write_text(USER_FILE)
    code, out, err = run(capsys, "trace", f"{path}:build", "--inputs", f"{path}:inputs", "--device", "cpu")
    assert (code, out) == (1, "")
    assert err.endswith("mynet.py:8: ValueError: expected dtype=torch.long, seq_len=4 for the ids\n"), err


def test_the_boundary_is_the_error_s_quoted_text() -> None:
    """vramsim's words become flags; what they quote stays word for word; ``str`` of the error is the whole line."""
    error = TraceError("Net failed on the meta device at seq_len=4", quoted="expected dtype=torch.long")
    assert str(error) == "Net failed on the meta device at seq_len=4: expected dtype=torch.long"
    assert cli_message(error) == "Net failed on the meta device at --seq-len 4: expected dtype=torch.long"
    assert cli_message(ConfigError(quoted="x.py:3: KeyError: 'seq_len'")) == "x.py:3: KeyError: 'seq_len'"
    assert cli_message(ConfigError("unsupported dtype='int3'")) == in_cli_words("unsupported dtype='int3'")
    assert in_cli_words("unsupported dtype='int3'") == "unsupported --dtype int3"
