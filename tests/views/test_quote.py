"""A quote in words at 80 columns: the itemised bill, what stopping early still costs, and whose prices they are."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from rich.console import Console

from vramsim.pricing import given_duration, load_sheet, quote
from vramsim.views.quote import format_money, render_quote

EXAMPLE = Path(__file__).parents[2] / "examples" / "prices.example.toml"


def test_a_given_duration_quote_at_80_columns() -> None:
    """The example's H100 offer, 8 GPUs for 10 days: a week (2,880) and 3 days (1,440), a month of storage (100),
    setup (50): 4,470; stopped after 2 days the week, the storage month and setup are paid: 3,030."""
    offer = load_sheet(EXAMPLE).offer("example-h100-nvlink")
    console = Console(width=80, record=True)
    render_quote(quote(offer, 8, given_duration(days=10), stop_after=given_duration(days=2)), console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    rows = [" ".join(line.strip("│┃ ").split()) for line in text.splitlines()]
    assert "GPU │ 1 week │ 8 │ 360.00 USD │ 2,880.00 USD" in rows
    assert "GPU │ 3 days │ 8 │ 60.00 USD │ 1,440.00 USD" in rows
    assert "setup │ once │ 1 │ 50.00 USD │ 50.00 USD" in rows
    assert "total │ │ │ │ 4,470.00 USD" in rows and "stopped after 2.0d (48h) │ │ │ │ 3,030.00 USD" in rows
    flat = " ".join(text.split())
    assert "Duration: 10.0d (240h), as given." in flat
    assert "Stopping early refunds nothing" in flat
    assert "Prices come from the price sheet" in flat and str(EXAMPLE) in "".join(text.split())


def test_money_keeps_what_the_sheet_wrote() -> None:
    assert format_money(Decimal("2880"), "EUR") == "2,880.00 EUR"
    assert format_money(Decimal("0.125"), "USD") == "0.125 USD"
