"""Every script in examples/ runs and prints its answer.

Each runs as ``python examples/NAME.py`` would (``__name__ == "__main__"``), inside the test worker: the
worker has torch, transformers and diffusers imported already, which a fresh interpreter per script
would import again (about ten seconds each on CI's two cores).
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_prints_its_answer(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(script), run_name="__main__")
    printed = capsys.readouterr().out
    assert "Answer:" in printed, printed[-2000:]
