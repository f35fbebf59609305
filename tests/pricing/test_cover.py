"""The cheapest cover is exact: the dynamic programme equals a brute force over every count of every period."""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import pytest

from vramsim.errors import ConfigError
from vramsim.pricing import Period
from vramsim.pricing.cover import cheapest_cover


def _brute_force(prices: dict[Period, Decimal], hours: int) -> Decimal:
    """The least price over all counts, each period bought at most enough times to cover ``hours`` alone."""
    periods = list(prices)
    ranges = [range(-(-hours // period.hours) + 1) for period in periods]
    return min(
        sum((n * prices[p] for n, p in zip(counts, periods, strict=True)), Decimal(0))
        for counts in itertools.product(*ranges)
        if sum(n * p.hours for n, p in zip(counts, periods, strict=True)) >= hours
    )


def _price(prices: dict[Period, Decimal], counts: dict[Period, int]) -> Decimal:
    return sum((prices[period] * count for period, count in counts.items()), Decimal(0))


def test_equals_brute_force_on_random_sheets() -> None:
    """150 random price tables (random subsets of the periods, prices in cents), durations up to 40 days."""
    rng = random.Random(26)
    for _ in range(150):
        chosen = [p for p in Period if rng.random() < 0.7] or [Period.DAY]
        if Period.HOUR in chosen and rng.random() < 0.5:
            chosen.remove(Period.HOUR)  # mostly day-grained tables, where hours would make the brute force slow
            chosen = chosen or [Period.DAY]
        prices = {p: Decimal(rng.randint(1, 40 * p.hours)) / 100 for p in chosen}
        hours = rng.randint(1, 40 * 24) if Period.HOUR not in prices else rng.randint(1, 4 * 24)
        counts = cheapest_cover(prices, hours)
        assert sum(p.hours * n for p, n in counts.items()) >= hours
        assert _price(prices, counts) == _brute_force(prices, hours), (prices, hours, counts)


def test_largest_fitting_period_first_would_pay_more() -> None:
    """25 days: filling with the longest period that fits, then shorter ones, buys 3 weeks + 4 days (190); a month,
    longer than the job, costs 170."""
    prices = {Period.DAY: Decimal(10), Period.WEEK: Decimal(50), Period.MONTH: Decimal(170)}
    assert cheapest_cover(prices, 25 * 24) == {Period.MONTH: 1}


def test_a_job_beyond_any_bill_is_a_bad_input() -> None:
    with pytest.raises(ConfigError, match="longer than vramsim bills"):
        cheapest_cover({Period.HOUR: Decimal(1)}, 10**9)
