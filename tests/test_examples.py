"""Every script in examples/ runs and prints its answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_prints_its_answer(script: Path) -> None:
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Answer:" in result.stdout, result.stdout[-2000:]
