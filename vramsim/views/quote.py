"""A Quote as the terminal shows it, at 80 columns: the offer, the duration and how it was found, the bill."""

from __future__ import annotations

from decimal import Decimal

from rich.console import Console
from rich.table import Table

from vramsim.results.quote import Duration, Quote
from vramsim.views.lines import print_wrapped

__all__ = ["duration_words", "format_flops", "format_money", "render_bill", "render_quote"]

_CENT = Decimal("0.01")


def format_money(amount: Decimal, currency: str) -> str:
    """``2,880.00 USD``: the exact amount, with cents at least (a sheet's 0.125 stays 0.125)."""
    shown = amount.quantize(_CENT) if amount.as_tuple().exponent > -2 else amount  # type: ignore[operator]
    return f"{shown:,f} {currency}"


def _span(hours: float) -> str:
    """``10.0d (240h)``: unit and figure written together, so that no line ends between them."""
    return f"{hours / 24:,.1f}d ({hours:,.0f}h)" if hours >= 48 else f"{hours:,.1f}h"


def format_flops(flops: float) -> str:
    """``1.23PFLOP``: the figure with the SI prefix that keeps it between 1 and 1000."""
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if flops >= scale:
            return f"{flops / scale:,.3g}{prefix}FLOP"
    return f"{flops:,.0f}FLOP"


def duration_words(duration: Duration) -> str:
    """How long the job runs, and, if derived, from what: the FLOPs per step and the utilisation assumed."""
    training = duration.training
    if training is None:
        return f"Duration: {_span(duration.hours)}, as given."
    step = training.step
    source = "MODEL_FLOPS_UTILISATION, estimators/assumptions.py" if training.mfu_source != "given" else "given"
    return (
        f"Duration: {_span(duration.hours)}, derived: {training.tokens:,} tokens are {training.steps:,} steps of "
        f"{step.tokens:,} tokens; {format_flops(step.total)} per step (forward {format_flops(step.forward)}, "
        f"backward {format_flops(step.backward)}, recompute {format_flops(step.recompute)}; counted from the traced "
        f"ops), {format_flops(training.flops)} in all, on {training.gpus} GPUs at {training.peak_tflops:,g}TFLOPS "
        f"dense {training.dtype} each ({training.peak_source}) x utilisation {training.mfu:.0%} ({source})."
    )


def render_quote(quote: Quote, console: Console) -> None:
    """The offer, the duration, the itemised bill and its total, what stopping early still costs, the sheet."""
    console.print(
        f"[bold]{quote.offer}[/bold] ({quote.provider}): {quote.gpus} x {quote.device}, {quote.interconnect}",
        highlight=False,
    )
    print_wrapped(console, duration_words(quote.duration))
    render_bill(quote, console)
    print_wrapped(console, f"Prices come from the price sheet {quote.sheet}, not from vramsim; check them with the provider.")


def render_bill(quote: Quote, console: Console) -> None:
    """The periods billed, the itemised bill and its total, and what stopping early still costs."""
    minimum = f"; minimum commitment {_span(quote.minimum_hours)}" if quote.minimum_hours else ""
    print_wrapped(
        console,
        f"Billed over {_span(quote.billed_hours)}{minimum}; the GPU periods bought cover {_span(quote.covered_hours)} "
        "(a week is 7 days, a month 30; a started period is paid whole).",
    )
    bill = Table(title_justify="left")
    for name in ("item", "periods", "GPUs", "price", "amount"):
        bill.add_column(name, justify="left" if name in ("item", "periods") else "right")
    for line in quote.lines:
        periods = "once" if line.period == "once" else f"{line.count:,} {line.period}{'s' if line.count != 1 else ''}"
        price = format_money(line.unit_price, quote.currency)
        bill.add_row(line.item, periods, str(line.gpus), price, format_money(line.amount, quote.currency))
    bill.add_row("total", "", "", "", format_money(quote.total, quote.currency), style="bold")
    if quote.stopped is not None:
        stopped = f"stopped after {_span(quote.stopped.seconds / 3600)}"
        bill.add_row(stopped, "", "", "", format_money(quote.stopped.total, quote.currency))
    console.print(bill)
    if quote.stopped is not None:
        print_wrapped(
            console,
            "Stopping early refunds nothing: what is paid then is every period started by that time, and all of the "
            "minimum commitment.",
        )
