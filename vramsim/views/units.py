"""Numbers as the terminal prints them: bytes in the binary units nvidia-smi and torch use."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(nbytes: int) -> str:
    """Binary units, as nvidia-smi and torch.cuda.memory_summary print them; the unit is the one that
    keeps the number under 1000 (1002 MiB reads 0.98 GiB), TiB's past it."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        text = f"{value:.0f}" if unit == "B" else f"{value:.2f}"
        if abs(float(text)) < 1000 or unit == "TiB":
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
