"""The billing periods rental catalogs use, each of a fixed length."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Period"]


class Period(StrEnum):
    """A billing period; the value is the key a price sheet writes.

    - HOUR: 1 hour.
    - DAY: 24 hours.
    - WEEK: exactly 7 days.
    - MONTH: exactly 30 days (catalogs bill a month as 30 days, not a calendar month).
    """

    HOUR = "hour"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"

    @property
    def hours(self) -> int:
        return _HOURS[self]


_HOURS = {Period.HOUR: 1, Period.DAY: 24, Period.WEEK: 7 * 24, Period.MONTH: 30 * 24}
