"""The range check every group of options applies to its counts."""

from __future__ import annotations

from typing import Any

from vramsim.errors import ConfigError

__all__ = ["check_count"]


def check_count(name: str, value: Any, limit: int, *, allow_zero: bool = False) -> None:
    """Refuse a count that is not an integer between 1 (0 with ``allow_zero``) and ``limit``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    low = 0 if allow_zero else 1
    if not low <= value <= limit:
        raise ConfigError(f"{name} must be between {low} and {limit}, got {value}")
