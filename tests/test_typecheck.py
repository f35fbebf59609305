"""mypy over the installed package (``.ci/typecheck``) passes: run inside the suite, so one worker checks types
while the other runs tests, instead of a serial CI step before them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_mypy_finds_no_issues() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / ".ci" / "typecheck")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
