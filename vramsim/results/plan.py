"""The result of ``vramsim plan``: each offer and GPU count that holds the job, its cheapest setting and its quote,
cheapest first (``vramsim/views/plan.py`` words it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vramsim.results.advice import Advice
from vramsim.results.quote import Quote, json_ready
from vramsim.results.strategy import Candidate

__all__ = ["Plan", "PlanRow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRow:
    """One offer on one GPU count: the cheapest setting that fits each rank, and what renting it costs."""

    setting: Candidate
    """The strategy search's cheapest setting on ``quote.gpus`` GPUs of the offer (per rank, its device figure)."""
    capacity_bytes: int
    """One GPU's memory."""
    usable_bytes: int
    """What the headroom leaves of it: the setting fits under this."""
    quote: Quote
    """The bill, whose ``key`` is this order's."""

    @property
    def spare_bytes(self) -> int:
        """One GPU's memory the setting leaves free."""
        return self.capacity_bytes - self.setting.device_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Every offer of a price sheet weighed for one job: the rows that fit, cheapest total first."""

    model: str
    sheet: str
    """The price sheet (its path): the prices are the sheet's, not vramsim's."""
    currency: str
    duration: dict[str, Any]
    """The duration's inputs as given: ``tokens``, ``days``, ``hours``, ``mfu``, ``max_gpus``, the most GPUs an
    order may have, and ``stop_after_hours``, when the quotes say what stopping then still pays (``None`` when not
    given)."""
    headroom: float
    rows: list[PlanRow]
    """Cheapest total first; of equal totals, the shorter job, then the fewer GPUs, then the sheet's order."""
    unfit: list[str] = field(default_factory=list)
    """Offers on none of whose GPU counts any setting fits."""
    advice: list[Advice] = field(default_factory=list)
    """When nothing fits anywhere: each change (fewer tokens per step, QLoRA, ...) searched on the offer with the
    most memory, its fit or not."""
    advice_offer: str | None = None
    """The offer the advice was searched on."""
    key: str
    """The request's key (``pricing/key.py``, ``plan_key``): the same request, the same key."""
    traces: int
    """Programs traced for the whole plan, the advice's searches included (offers of GPUs alike but for their
    memory share their traces)."""
    trace_seconds: float

    @property
    def cheapest(self) -> PlanRow | None:
        return self.rows[0] if self.rows else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: money as decimal strings (exact), bytes and seconds as numbers."""
        data = json_ready(asdict(self))
        for row, given in zip(data["rows"], self.rows, strict=True):
            row["spare_bytes"] = given.spare_bytes
        return data

    def __repr__(self) -> str:
        best = self.cheapest
        told = f"{best.quote.offer} x{best.quote.gpus} {best.quote.total} {self.currency}" if best else "none fits"
        return f"<Plan {self.model} {len(self.rows)} rows, cheapest {told}>"
