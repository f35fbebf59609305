"""Advice records as the lines ``vramsim trace`` prints under a verdict: the flags to change and what they give."""

from __future__ import annotations

from vramsim.results.advice import Advice
from vramsim.views.fit import held_flag, largest_line
from vramsim.views.units import format_bytes

__all__ = ["advice_line", "flags"]


def flags(changes: dict[str, object]) -> str:
    """Options as the command line spells them: ``{"zero": 3}`` -> ``--zero 3``, ``{"expandable_segments": True}``
    -> ``--expandable-segments`` (a switch)."""
    spelled = (f"--{name.replace('_', '-')}" + ("" if value is True else f" {value}") for name, value in changes.items())
    return " ".join(spelled)


def advice_line(advice: Advice) -> str:
    """One advice as a line: the change, then its device memory and saving, marked when another trace measured it."""
    if advice.largest is not None and advice.held is not None:
        ((held, value),) = advice.held.items()
        return largest_line(advice.largest, held_flag(held, value), advice=True)
    traced = " (traced)" if advice.traced else ""
    fits = " (fits)" if advice.fits else ""
    saving = f"{format_bytes(advice.device_bytes)} on the device (-{format_bytes(advice.saved_bytes)})"
    return f"{flags(advice.changes)}{traced}: {saving}{fits}"
