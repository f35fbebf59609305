"""The cheapest combination of billing periods that covers a duration, solved exactly.

Every period is a whole number of hours, so covering a duration is covering its started hours, and the question is
an unbounded covering knapsack: counts ``n_p`` with ``sum(n_p * hours_p) >= H`` at the least ``sum(n_p * price_p)``.
A dynamic programme over the hours (in steps of the periods' greatest common divisor: days when no hourly price is
given) answers it exactly, where filling with the longest period that fits and topping up with shorter ones pays
too much (25 days at 10 a day, 50 a week, 170 a month: 3 weeks + 4 days cost 190, a month 170);
tests/pricing/test_cover.py checks it against a brute force.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from math import gcd

from vramsim.errors import ConfigError

from .periods import Period

__all__ = ["MAX_STEPS", "cheapest_cover"]

MAX_STEPS = 2_000_000
"""Steps of the programme at most (228 years in hours, 5,479 years in days): a longer job is a bad input."""


def cheapest_cover(prices: Mapping[Period, Decimal], hours: int) -> dict[Period, int]:
    """The count of each period (longest first, only those bought) that covers ``hours`` at the least price; of
    equal prices, the one with the fewest periods, then the one covering the fewest hours."""
    if not prices:
        raise ConfigError("an offer or option priced per period gives at least one period's price")
    if hours <= 0:
        return {}
    periods = sorted(prices, key=lambda period: period.hours, reverse=True)
    step = 0
    for period in periods:
        step = gcd(step, period.hours)
    need = -(-hours // step)
    if need > MAX_STEPS:
        raise ConfigError(f"a job of {hours:,} hours is longer than vramsim bills ({MAX_STEPS * step:,} hours at most)")
    lengths = [period.hours // step for period in periods]
    # best[u]: (price, periods, covered steps) of the cheapest cover of at least u steps; choice[u]: its first period.
    best: list[tuple[Decimal, int, int]] = [(Decimal(0), 0, 0)]
    choice: list[int] = [-1]
    for units in range(1, need + 1):
        options = []
        for index, length in enumerate(lengths):
            price, count, covered = best[max(units - length, 0)]
            options.append(((price + prices[periods[index]], count + 1, covered + length), index))
        cost, index = min(options)
        best.append(cost)
        choice.append(index)
    counts = dict.fromkeys(periods, 0)
    units = need
    while units > 0:
        index = choice[units]
        counts[periods[index]] += 1
        units -= lengths[index]
    return {period: count for period, count in counts.items() if count}
