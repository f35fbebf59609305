"""The cheapest data-parallel setting that fits, every candidate computed from one trace.

A training step traced once answers every data-parallel scheme (DDP, ZeRO-1/2/3, FSDP2) and every
checkpointing choice over any number of ranks: each is a what-if over the traced graph
(``simulate_each``), never a re-run of the model. The candidates are ordered by what they cost
beyond memory: the fewest GPUs first, then the least recompute (``CHECKPOINTING_BY_RECOMPUTE``), then
the least communication per step (``assumptions.DATA_PARALLEL_COMMUNICATION``), then the least
device memory; the first that fits is the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from vramsim.estimators.assumptions import DATA_PARALLEL_COMMUNICATION

from .api import simulate_each
from .config import SimulationConfig
from .errors import ConfigError, UnsupportedError
from .models import ModelSource

__all__ = ["CHECKPOINTING_BY_RECOMPUTE", "SCHEMES", "Candidate", "StrategySearch", "cheapest_strategy"]

SCHEMES: dict[str, dict[str, Any]] = {
    "DDP": {"zero": 0, "fsdp": "no"},
    "ZeRO-1": {"zero": 1, "fsdp": "no"},
    "ZeRO-2": {"zero": 2, "fsdp": "no"},
    "FSDP2 grad-op": {"zero": 0, "fsdp": "grad-op"},
    "ZeRO-3": {"zero": 3, "fsdp": "no"},
    "FSDP2 full": {"zero": 0, "fsdp": "full"},
}
"""The data-parallel schemes tried on more than one GPU, as ``simulate`` options."""

CHECKPOINTING_BY_RECOMPUTE = ("none", "selective", "every:2", "full")
"""Checkpointing choices from the least recomputed forward to the most: nothing, attention's core,
every other decoder layer, every layer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One setting and what one rank of it takes."""

    gpus: int
    scheme: str
    """A name of ``SCHEMES``, or ``one GPU``."""
    checkpointing: str
    device_bytes: int
    peak_bytes: int
    fits: bool
    communication: float
    """Bytes communicated per step per rank, in units of the model's weights (``DATA_PARALLEL_COMMUNICATION``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategySearch:
    """Every candidate tried, cheapest first, and the first that fits."""

    model: str
    target: str
    usable_bytes: int
    max_gpus: int
    candidates: list[Candidate]
    cheapest: Candidate | None
    """None when none fits on up to ``max_gpus`` GPUs."""
    trace_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim fit --strategies --json`` prints it under ``strategies``."""
        return asdict(self)

    def options(self) -> dict[str, Any]:
        """The cheapest candidate as ``simulate`` options (empty when none fits)."""
        if self.cheapest is None:
            return {}
        scheme = SCHEMES.get(self.cheapest.scheme, {"zero": 0, "fsdp": "no"})
        return {"gpus": self.cheapest.gpus, "checkpointing": self.cheapest.checkpointing, **scheme}


def cheapest_strategy(
    model: ModelSource, *, progress: Callable[[str], None] | None = None, **options: Any
) -> StrategySearch:
    """Every scheme x checkpointing choice on 1, 2, 4, ... up to ``gpus`` GPUs from one trace; the cheapest that fits.

    >>> search = cheapest_strategy("meta-llama/Llama-3.2-1B", gpus=8, seq_len=2048, mixed_precision="bf16", device="rtx-4090")
    >>> search.cheapest.gpus, search.cheapest.scheme, search.cheapest.checkpointing
    (2, 'FSDP2 grad-op', 'none')
    """
    config = SimulationConfig.from_options(**options)
    if config.task != "train":
        raise UnsupportedError(f"the strategy search shards a training step; task='{config.task}' has none")
    if (config.tp > 1 or config.pp > 1 or config.ep > 1 or config.cp > 1 or config.zero or config.fsdp != "no"
            or config.offload_states != "none"):  # fmt: skip
        raise ConfigError("the strategy search chooses the scheme and checkpointing itself: give gpus (the most GPUs), "
                          "not tp, pp, ep, cp, zero, fsdp or offload_states")  # fmt: skip
    if config.device.lower() == "cpu":
        raise ConfigError("the strategy search judges a GPU's memory; the cpu target has no fixed size (choose a device)")
    counts = sorted({*(1 << i for i in range(config.gpus.bit_length()) if 1 << i <= config.gpus), config.gpus})
    settings = [(1, "one GPU", c) for c in CHECKPOINTING_BY_RECOMPUTE]
    settings += [(n, scheme, c) for n in counts if n > 1 for scheme in SCHEMES for c in CHECKPOINTING_BY_RECOMPUTE]
    variants = [{"gpus": n, "checkpointing": c, **SCHEMES.get(scheme, {})} for n, scheme, c in settings]
    if progress is not None:
        progress(f"tracing {model} once for {len(variants)} settings")
    started = time.perf_counter()
    base = {k: v for k, v in options.items() if k not in ("gpus", "checkpointing")}
    reports = simulate_each(model, variants, advise=False, **base)
    capacity = reports[0].capacity_bytes
    assert capacity is not None, "a GPU target has a capacity"
    candidates = [
        Candidate(gpus=n, scheme=scheme, checkpointing=c, device_bytes=r.device_bytes, peak_bytes=r.peak_bytes,
                  fits=r.device_bytes <= int(capacity * (1 - config.headroom)),
                  communication=DATA_PARALLEL_COMMUNICATION[scheme] if n > 1 else 0.0)
        for (n, scheme, c), r in zip(settings, reports, strict=True)
    ]  # fmt: skip
    candidates.sort(key=lambda c: (c.gpus, CHECKPOINTING_BY_RECOMPUTE.index(c.checkpointing), c.communication,
                                   c.device_bytes))  # fmt: skip
    return StrategySearch(
        model=reports[0].model, target=reports[0].target, usable_bytes=int(capacity * (1 - config.headroom)),
        max_gpus=config.gpus, candidates=candidates, cheapest=next((c for c in candidates if c.fits), None),
        trace_seconds=round(time.perf_counter() - started, 3),
    )  # fmt: skip
