"""A price quote for renting GPUs: plain data (``vramsim/views/quote.py`` words it).

Money is ``decimal.Decimal`` in the sheet's currency, exact to the cent the sheet writes: amounts are products and
sums of the sheet's prices, never floats. Durations are seconds; billing counts whole hours.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

__all__ = ["Duration", "Quote", "QuoteLine", "StepFlops", "Stopped", "TrainingEstimate", "json_ready"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFlops:
    """The FLOPs of one training step, counted from the traced ops (``torch.utils.flop_counter``'s formulas)."""

    forward: int
    backward: int
    recompute: int
    """What activation checkpointing runs again inside backward."""
    tokens: int
    """Tokens the step trains on (batch x sequence x gradient-accumulation micro-steps)."""

    @property
    def total(self) -> int:
        return self.forward + self.backward + self.recompute


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingEstimate:
    """How a training job's duration was derived: its FLOPs over the GPUs' assumed throughput."""

    step: StepFlops
    tokens: int
    """Tokens the job trains on."""
    steps: int
    """Training steps: tokens / the step's tokens, a started step run whole."""
    gpus: int
    dtype: str
    """The compute dtype whose peak the GPUs are taken at."""
    peak_tflops: float
    """One GPU's dense peak for ``dtype``."""
    peak_source: str
    """Where the peak comes from (the datasheet, or the price sheet)."""
    mfu: float
    """The share of the peak the step is assumed to run at."""
    mfu_source: str
    """``MODEL_FLOPS_UTILISATION`` (estimators/assumptions.py) or ``given``."""

    @property
    def flops(self) -> int:
        """FLOPs of the whole job."""
        return self.steps * self.step.total


@dataclass(frozen=True, slots=True, kw_only=True)
class Duration:
    """How long a job holds the GPUs: given by the user, or derived from its work (``training``)."""

    seconds: float
    training: TrainingEstimate | None = None

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    def __repr__(self) -> str:
        return f"<Duration {self.hours:,.2f} h{' derived' if self.training else ''}>"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuoteLine:
    """One item of the bill: ``count`` periods x ``gpus`` x ``unit_price`` (an option: ``gpus`` is 1)."""

    item: str
    """``GPU`` or the option's name."""
    period: str
    """``hour``, ``day``, ``week`` (7 days), ``month`` (30 days) or ``once``."""
    count: int
    gpus: int
    unit_price: Decimal
    """Per GPU per period (an option: per period, or once)."""
    amount: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class Stopped:
    """What is paid anyway when the job stops after ``seconds``: every period started by then (nothing is
    refunded), and all of the minimum commitment."""

    seconds: float
    lines: tuple[QuoteLine, ...]
    total: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class Quote:
    """The cheapest bill for one offer of a price sheet, GPU count and duration."""

    sheet: str
    """The price sheet the prices come from (its path); vramsim ships no prices."""
    offer: str
    provider: str
    device: str
    """The catalog key (or ``custom:...``) of the offer's GPU."""
    interconnect: str
    gpus: int
    currency: str
    duration: Duration
    minimum_hours: int
    """The offer's minimum commitment; the bill covers at least this."""
    billed_hours: int
    """Hours the job is billed over: its duration in started hours, or the minimum if longer."""
    covered_hours: int
    """Hours the GPU periods bought add up to (at least ``billed_hours``)."""
    lines: tuple[QuoteLine, ...]
    total: Decimal
    stopped: Stopped | None = None
    key: str = ""
    """The order's key (``pricing/key.py``, ``order_key``): what a retry of this same order passes to a provider's
    purchase API as its idempotency key. A quote of a plan carries it; one made alone, none."""

    def to_dict(self) -> dict[str, Any]:
        """The quote as JSON-ready data: money as decimal strings (exact), durations in seconds."""
        return json_ready(asdict(self))

    def __repr__(self) -> str:
        return f"<Quote {self.offer} x{self.gpus} {self.total} {self.currency}>"


def json_ready(value: Any) -> Any:
    """``asdict``'s output with every Decimal as its exact string."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    return value
