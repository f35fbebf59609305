"""Options taken as given that do less, or other, than a reader of the command may think: each one line.

They are warnings, not errors: the run is what was asked for, but the answer is easy to misread. The
config keeps them (``SimulationConfig.warnings``); the command line prints them, the report lists them.
"""

from __future__ import annotations

import re

from vramsim.estimators.devices import ALIASES, DEVICES
from vramsim.estimators.sharding import ShardingPlan

__all__ = ["SMALLER_SHARE", "device_warning", "sharding_warning"]

SMALLER_SHARE = 0.9
"""A card of the family with less than this share of the chosen card's memory is another size of it."""


def _fold(name: str) -> str:
    """A name as the catalog matches it: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def device_warning(name: str) -> str | None:
    """An alias that picks one size of a card sold in several (``a100`` is the 80 GB card), unless it names
    the size itself (``h100-80gb``)."""
    folded = _fold(name)
    alias = next((alias for alias in ALIASES if _fold(alias) == folded), None)
    if alias is None or re.search(r"\d+gb", folded):
        return None
    chosen = DEVICES[ALIASES[alias]]
    family = _fold(alias.split("-")[0])
    least = SMALLER_SHARE * (chosen.memory_bytes or 0)
    smaller = [
        key
        for key, profile in DEVICES.items()
        if _fold(key.removeprefix("rtx-")).startswith(family) and (profile.memory_bytes or 0) < least
    ]
    if not smaller:
        return None
    hold = "holds" if len(smaller) == 1 else "hold"
    return (
        f"device={name!r} is the {chosen.name} ({chosen.label}); the {' and '.join(smaller)} {hold} less: "
        "name the card you have (vramsim gpus lists them)"
    )


def sharding_warning(sharding: ShardingPlan, gpus: int) -> str | None:
    """ZeRO or FSDP over one data-parallel rank: nothing is split, each stage holds what DDP holds."""
    if sharding.gpus > 1 or not (sharding.zero or sharding.fsdp != "no"):
        return None
    scheme = f"zero={sharding.zero}" if sharding.zero else f"fsdp={sharding.fsdp!r}"
    return f"{scheme} shards over the data-parallel ranks, and gpus={gpus} leaves 1: nothing is sharded; give gpus=N"
