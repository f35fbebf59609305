"""The result cache on, in a folder of the test's own: the suite's conftest turns it off everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramsim.cache.store import NO_CACHE_VARIABLE


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_CACHE_HOME`` for this test alone, with the cache on; the cache is ``cache_home / "vramsim"``."""
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(NO_CACHE_VARIABLE, raising=False)
    return home
