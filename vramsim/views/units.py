"""Numbers as the terminal prints them: bytes in the binary units nvidia-smi and torch use."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(nbytes: int) -> str:
    """Binary units, as nvidia-smi and torch.cuda.memory_summary print them."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
