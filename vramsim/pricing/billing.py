"""The bill for renting an offer's GPUs for a duration: the cheapest periods that cover it, and its options.

The job is billed over its started hours, or the offer's minimum commitment if that is longer. The GPUs are billed
as the cheapest cover of that span (``cover.py``), the same periods for every GPU; each option priced per period
gets its own cheapest cover of the same span, and a one-off option is paid once. The periods run one after another,
longest first, and a period once started is paid whole: stopping after ``stop_after`` refunds nothing, so what is
paid then is every period started by that time, and all those started within the minimum commitment.
"""

from __future__ import annotations

from decimal import Decimal
from math import ceil

from vramsim.errors import ConfigError
from vramsim.results.quote import Duration, Quote, QuoteLine, Stopped

from .cover import cheapest_cover
from .periods import Period
from .sheet import Offer

__all__ = ["quote"]


def quote(offer: Offer, gpus: int, duration: Duration, stop_after: Duration | None = None) -> Quote:
    """The cheapest bill for ``gpus`` of ``offer`` over ``duration``; with ``stop_after``, also what is paid anyway
    if the job stops then.

    >>> from vramsim.pricing import given_duration, load_sheet
    >>> offer = load_sheet("examples/prices.example.toml").offers[0]
    >>> quote(offer, 8, given_duration(days=10)).total > 0
    True
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= offer.gpus_available:
        raise ConfigError(
            f"offer {offer.name!r} has {offer.gpus_available} GPUs ({offer.nodes} nodes of {offer.gpus_per_node}); "
            f"got gpus={gpus!r}"
        )
    if duration.seconds <= 0:
        raise ConfigError(f"a job's duration is more than 0; got {duration.hours:g} hours")
    billed = max(ceil(duration.seconds / 3600), offer.minimum_hours)
    lines = _bill(offer, gpus, billed, until=None)
    stopped = None
    if stop_after is not None:
        if not 0 < stop_after.seconds <= duration.seconds:
            raise ConfigError(
                f"stop_after is within the job: more than 0 and at most its {duration.hours:,.1f} hours; "
                f"got {stop_after.hours:,.1f} hours"
            )
        paid = _bill(offer, gpus, billed, until=max(stop_after.seconds, offer.minimum_hours * 3600))
        stopped = Stopped(seconds=stop_after.seconds, lines=tuple(paid), total=_total(paid))
    return Quote(
        sheet=offer.sheet,
        offer=offer.name,
        provider=offer.provider,
        device=offer.device.name,
        interconnect=offer.interconnect,
        gpus=gpus,
        currency=offer.currency,
        duration=duration,
        minimum_hours=offer.minimum_hours,
        billed_hours=billed,
        covered_hours=sum(period.hours * count for period, count in cheapest_cover(offer.prices, billed).items()),
        lines=tuple(lines),
        total=_total(lines),
        stopped=stopped,
    )


def _bill(offer: Offer, gpus: int, billed: int, *, until: float | None) -> list[QuoteLine]:
    """The GPUs' lines, then each option's, over ``billed`` hours; with ``until`` (seconds), only the periods
    started before it."""
    lines = _lines("GPU", gpus, offer.prices, _started(cheapest_cover(offer.prices, billed), until))
    for option in offer.options:
        if option.once is not None:
            lines.append(QuoteLine(item=option.name, period="once", count=1, gpus=1, unit_price=option.once, amount=option.once))
        else:
            lines += _lines(option.name, 1, option.prices, _started(cheapest_cover(option.prices, billed), until))
    return lines


def _lines(item: str, gpus: int, prices: dict[Period, Decimal], counts: dict[Period, int]) -> list[QuoteLine]:
    """One line per period bought, longest first."""
    return [
        QuoteLine(
            item=item,
            period=period.value,
            count=count,
            gpus=gpus,
            unit_price=prices[period],
            amount=count * gpus * prices[period],
        )
        for period, count in counts.items()
    ]


def _started(counts: dict[Period, int], until: float | None) -> dict[Period, int]:
    """Of the periods ``counts`` buys, run longest first from time 0, those started before ``until`` seconds (all
    of them when ``until`` is None)."""
    if until is None:
        return counts
    started: dict[Period, int] = {}
    start = 0
    for period, count in counts.items():
        for _ in range(count):
            if start * 3600 >= until:
                return started
            started[period] = started.get(period, 0) + 1
            start += period.hours
    return started


def _total(lines: list[QuoteLine]) -> Decimal:
    return sum((line.amount for line in lines), Decimal(0))
