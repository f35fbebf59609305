"""Sizes per GPU as ``from_pretrained(max_memory=...)`` takes them ("20GiB", "24GB"), as bytes."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_max_memory", "parse_size"]

_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_UNITS |= {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
"""accelerate's convert_file_size_to_int: the binary units by powers of 2, the decimal ones by powers of 10."""

_SIZE = re.compile(r"(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>[kmgt]i?b|b)?")


def parse_size(text: Any) -> int:
    """Bytes of ``text``: an int, or a number with a unit (20GiB, 24GB, 512MiB); ``ValueError`` otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    match = _SIZE.fullmatch(str(text).strip().lower())
    if match is None or float(match["amount"]) <= 0:
        raise ValueError(f"max_memory takes sizes such as 20GiB or 24GB, got {text!r}")
    return int(float(match["amount"]) * _UNITS[match["unit"] or ""])


def parse_max_memory(value: Any, gpus: int) -> tuple[int, ...] | None:
    """One size per GPU: ``None`` (accelerate reads each GPU), one size for all, or ``gpus`` of them."""
    if value is None:
        return None
    sizes = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [value]
    parsed = tuple(parse_size(size) for size in sizes)
    if len(parsed) == 1:
        return parsed * gpus
    if len(parsed) != gpus:
        raise ValueError(f"max_memory gives {len(parsed)} sizes for gpus={gpus}: give one, or one per GPU")
    return parsed
