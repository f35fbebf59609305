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
    gpu_cover = cheapest_cover(offer.prices, billed)
    lines = _lines("GPU", gpus, offer.prices, gpu_cover) + _option_lines(offer, billed)
    stopped = None
    if stop_after is not None:
        if not 0 < stop_after.seconds <= duration.seconds:
            raise ConfigError(
                f"stop_after is within the job: more than 0 and at most its {duration.hours:,.1f} hours; "
                f"got {stop_after.hours:,.1f} hours"
            )
        stopped = _stopped(offer, gpus, billed, stop_after.seconds)
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
        covered_hours=sum(period.hours * count for period, count in gpu_cover.items()),
        lines=tuple(lines),
        total=sum((line.amount for line in lines), Decimal(0)),
        stopped=stopped,
    )


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


def _option_lines(offer: Offer, billed: int) -> list[QuoteLine]:
    lines: list[QuoteLine] = []
    for option in offer.options:
        if option.once is not None:
            lines.append(QuoteLine(item=option.name, period="once", count=1, gpus=1, unit_price=option.once, amount=option.once))
        else:
            lines += _lines(option.name, 1, option.prices, cheapest_cover(option.prices, billed))
    return lines


def _stopped(offer: Offer, gpus: int, billed: int, seconds: float) -> Stopped:
    """What stopping after ``seconds`` still costs: the periods started by then or within the minimum commitment."""
    owed_until = max(seconds, offer.minimum_hours * 3600)
    lines = _started("GPU", gpus, offer.prices, cheapest_cover(offer.prices, billed), owed_until)
    for option in offer.options:
        if option.once is not None:
            lines.append(QuoteLine(item=option.name, period="once", count=1, gpus=1, unit_price=option.once, amount=option.once))
        else:
            lines += _started(option.name, 1, option.prices, cheapest_cover(option.prices, billed), owed_until)
    return Stopped(seconds=seconds, lines=tuple(lines), total=sum((line.amount for line in lines), Decimal(0)))


def _started(item: str, gpus: int, prices: dict[Period, Decimal], counts: dict[Period, int], until: float) -> list[QuoteLine]:
    """The periods of ``counts``, run longest first from time 0, that have started before ``until`` seconds."""
    started: dict[Period, int] = {}
    start = 0
    for period, count in counts.items():
        for _ in range(count):
            if start * 3600 >= until:
                return _lines(item, gpus, prices, started)
            started[period] = started.get(period, 0) + 1
            start += period.hours
    return _lines(item, gpus, prices, started)
