"""Quotes from a hand-checked sheet: each total worked out by hand in the test's docstring or comment."""

from __future__ import annotations

from decimal import Decimal

import pytest

from vramsim.errors import ConfigError
from vramsim.pricing import Offer, given_duration, parse_sheet, quote

SHEET = {
    "currency": "EUR",
    "offer": [
        {
            # day 10, week 50, month 200: a week costs 5 days, a month less than 4 weeks + 2 days (220).
            "name": "weekly",
            "provider": "Hand Cloud",
            "gpu": "h100-sxm",
            "gpus_per_node": 8,
            "nodes": 2,
            "interconnect": "nvlink",
            "price": {"day": 10, "week": 50, "month": 200},
            "option": [
                {"name": "storage", "price": {"week": Decimal("7.5")}},
                {"name": "setup", "once": 25},
            ],
        },
        {
            # a week at 2.5 days' price (25): two weeks beat a week and 3 days.
            "name": "cheap-week",
            "provider": "Hand Cloud",
            "gpu": "a100",
            "gpus_per_node": 4,
            "nodes": 1,
            "interconnect": "pcie",
            "price": {"day": 10, "week": 25},
        },
        {
            "name": "committed",
            "provider": "Hand Cloud",
            "gpu": "mi300x",
            "gpus_per_node": 8,
            "nodes": 1,
            "interconnect": "infiniband",
            "minimum": {"weeks": 2},
            "price": {"hour": Decimal("0.5"), "day": 10},
        },
    ],
}


@pytest.fixture(scope="module")
def offers() -> dict[str, Offer]:
    return {offer.name: offer for offer in parse_sheet(SHEET, "hand.toml").offers}


def _gpu_periods(offer: Offer, gpus: int, days: float) -> dict[str, int]:
    return {line.period: line.count for line in quote(offer, gpus, given_duration(days=days)).lines if line.item == "GPU"}


def test_one_day(offers: dict[str, Offer]) -> None:
    """1 day on 2 GPUs: 1 day x 2 x 10 = 20; storage 1 week 7.50; setup 25: 52.50."""
    bill = quote(offers["weekly"], 2, given_duration(days=1))
    assert [(line.item, line.period, line.count, line.amount) for line in bill.lines] == [
        ("GPU", "day", 1, Decimal(20)),
        ("storage", "week", 1, Decimal("7.5")),
        ("setup", "once", 1, Decimal(25)),
    ]
    assert bill.total == Decimal("52.50") and bill.currency == "EUR" and bill.sheet == "hand.toml"


def test_ten_days_week_and_three_days_beat_two_weeks(offers: dict[str, Offer]) -> None:
    """10 days, week 50 and day 10: 1 week + 3 days = 80 per GPU beats 2 weeks = 100. On 8 GPUs: 640; storage
    2 weeks 15; setup 25: 680."""
    bill = quote(offers["weekly"], 8, given_duration(days=10))
    assert _gpu_periods(offers["weekly"], 8, 10) == {"week": 1, "day": 3}
    assert bill.total == Decimal(680) and bill.covered_hours == 240


def test_ten_days_two_weeks_beat_week_and_three_days(offers: dict[str, Offer]) -> None:
    """10 days, week 25 and day 10: 2 weeks = 50 per GPU beat 1 week + 3 days = 55; on 4 GPUs 200, covering 14 days."""
    bill = quote(offers["cheap-week"], 4, given_duration(days=10))
    assert _gpu_periods(offers["cheap-week"], 4, 10) == {"week": 2}
    assert bill.total == Decimal(200) and bill.covered_hours == 14 * 24


def test_thirty_days_one_month_beats_four_weeks_and_two_days(offers: dict[str, Offer]) -> None:
    """30 days: a month 200 < 4 weeks + 2 days 220. One GPU: 200; storage 5 weeks (35 days cover 30) 37.50;
    setup 25: 262.50."""
    bill = quote(offers["weekly"], 1, given_duration(days=30))
    assert _gpu_periods(offers["weekly"], 1, 30) == {"month": 1}
    assert bill.total == Decimal("262.50")


def test_twenty_five_days_and_a_month(offers: dict[str, Offer]) -> None:
    """Month 200: 25 days are 3 weeks + 4 days (190); 26 days cost 200 as 3 weeks + 5 days, 4 weeks or a month,
    and the month (one period) is chosen; 29 days: a month (200) beats 4 weeks + a day (210). With the month at 170,
    25 days cost less as a month (170) than as 3 weeks + 4 days (190)."""
    assert _gpu_periods(offers["weekly"], 1, 25) == {"week": 3, "day": 4}
    assert _gpu_periods(offers["weekly"], 1, 26) == {"month": 1}
    assert _gpu_periods(offers["weekly"], 1, 29) == {"month": 1}
    cheap_month = {**SHEET["offer"][0], "price": {"day": 10, "week": 50, "month": 170}}
    offer = parse_sheet({"offer": [cheap_month]}, "hand.toml").offers[0]
    assert _gpu_periods(offer, 1, 25) == {"month": 1}


def test_forty_five_days(offers: dict[str, Offer]) -> None:
    """45 days: a month + 2 weeks + a day = 310; a month + 3 weeks = 350; 6 weeks + 3 days = 330; 2 months = 400.
    On 2 GPUs 620; storage 7 weeks (49 days) 52.50; setup 25: 697.50."""
    bill = quote(offers["weekly"], 2, given_duration(days=45))
    assert _gpu_periods(offers["weekly"], 2, 45) == {"month": 1, "week": 2, "day": 1}
    assert bill.total == Decimal("697.50")


def test_minimum_commitment_is_billed(offers: dict[str, Offer]) -> None:
    """Minimum 2 weeks: 3 days are billed as 14 days = 140 per GPU (hours at 0.5 would be 168: days win); on 8
    GPUs 1,120. Past the minimum, 20 days and 5 hours: 20 days 200 + 5 hours 2.50 = 202.50 per GPU, 1,620 on 8."""
    short = quote(offers["committed"], 8, given_duration(days=3))
    assert short.billed_hours == 14 * 24 and short.total == Decimal(1120)
    long = quote(offers["committed"], 8, given_duration(days=20, hours=5))
    assert [(line.period, line.count) for line in long.lines] == [("day", 20), ("hour", 5)]
    assert long.total == Decimal(1620)


def test_a_started_hour_is_paid_whole(offers: dict[str, Offer]) -> None:
    """20 days and 1 minute on the hourly offer: 20 days + 1 hour."""
    bill = quote(offers["committed"], 1, given_duration(days=20, hours=1 / 60))
    assert [(line.period, line.count) for line in bill.lines] == [("day", 20), ("hour", 1)]


def test_stopping_early_refunds_nothing(offers: dict[str, Offer]) -> None:
    """10 days bought as a week then 3 days, on 8 GPUs (680 in all). Stopped after 2 days: the week is started
    (400), the days are not; storage's first week (7.50) and setup (25): 432.50. Stopped after 7 days and 1 hour:
    the week and the first day (480), storage's second week started (15), setup: 520."""
    early = quote(offers["weekly"], 8, given_duration(days=10), stop_after=given_duration(days=2))
    assert early.total == Decimal(680) and early.stopped is not None
    assert early.stopped.total == Decimal("432.50")
    later = quote(offers["weekly"], 8, given_duration(days=10), stop_after=given_duration(days=7, hours=1))
    assert later.stopped is not None and later.stopped.total == Decimal(520)


def test_stopping_inside_the_minimum_pays_the_minimum(offers: dict[str, Offer]) -> None:
    """Minimum 2 weeks, 20 days bought as days: stopping after a day still owes the 14 days of the minimum, 140 per GPU."""
    bill = quote(offers["committed"], 1, given_duration(days=20), stop_after=given_duration(days=1))
    assert bill.stopped is not None and bill.stopped.total == Decimal(140)


@pytest.mark.parametrize(
    ("gpus", "duration", "stop", "message"),
    [
        (17, 1, None, "has 16 GPUs"),
        (0, 1, None, "has 16 GPUs"),
        (8, 1, 2, "stop_after is within the job"),
    ],
)
def test_bad_requests_are_one_line(
    offers: dict[str, Offer], gpus: int, duration: float, stop: float | None, message: str
) -> None:
    stop_after = given_duration(days=stop) if stop else None
    with pytest.raises(ConfigError, match=message) as error:
        quote(offers["weekly"], gpus, given_duration(days=duration), stop_after=stop_after)
    assert "\n" not in str(error.value)


def test_quote_as_data_keeps_money_exact(offers: dict[str, Offer]) -> None:
    data = quote(offers["weekly"], 2, given_duration(days=1)).to_dict()
    assert data["total"] == "52.5" and data["lines"][1]["unit_price"] == "7.5"
    assert data["duration"] == {"seconds": 86400.0, "training": None}
