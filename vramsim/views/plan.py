"""A Plan as the terminal shows it, at 80 columns: every offer and GPU count that holds the job, cheapest first,
then how the cheapest's duration was found and its itemised bill, where the prices come from, and the keys."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from vramsim.results.advice import Advice
from vramsim.results.plan import Plan, PlanRow
from vramsim.views.lines import print_wrapped
from vramsim.views.quote import duration_words, format_money, render_bill
from vramsim.views.units import format_bytes

__all__ = ["plan_flags", "render_plan", "setting_words"]


def setting_words(row: PlanRow) -> str:
    """``TP 2 x PP 2 (1f1b), ZeRO-1, checkpointing full``: the layout, the scheme, the checkpointing run."""
    setting = row.setting
    parts = [f"{name.upper()} {getattr(setting, name)}" for name in ("tp", "pp", "cp", "ep") if getattr(setting, name) > 1]
    schedule = f" ({setting.pp_schedule})" if setting.pp_schedule else ""
    layout = " x ".join(parts) + schedule
    plan = setting.checkpointing if setting.plan == setting.checkpointing else f"{setting.checkpointing}: {setting.plan}"
    return ", ".join(p for p in (layout, setting.scheme, f"checkpointing {plan.replace('+', '+ ')}") if p)


def plan_flags(changes: dict[str, object]) -> str:
    """Options as the command line spells them; a LoRA as its rank (``--lora-rank 16``)."""
    words = []
    for name, value in changes.items():
        if name == "lora" and isinstance(value, dict):
            words.append(f"--lora-rank {value['r']}")
        elif name != "gpus":
            words.append(f"--{name.replace('_', '-')} {value}")
    return " ".join(words)


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours / 24:,.1f}d" if hours >= 48 else f"{hours:,.1f}h"


def _rows_table(plan: Plan) -> Table:
    """One row per offer and GPU count: the words wrap, the figures never do."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for name in ("offer", "GPUs", "setting", "per GPU", "free", "time", f"total {plan.currency}"):
        words = name in ("offer", "setting")
        table.add_column(
            name, justify="left" if words else "right", no_wrap=not words, overflow="fold", ratio=1 if words else None
        )
    for row in plan.rows:
        spare = row.spare_bytes
        table.add_row(
            row.quote.offer,
            str(row.quote.gpus),
            setting_words(row),
            format_bytes(row.setting.device_bytes),
            f"{spare / row.capacity_bytes:.0%}",
            _hours(row.quote.duration.seconds),
            format_money(row.quote.total, "").strip(),
        )
    return table


def _advice_line(advice: Advice) -> str:
    fits = "fits" if advice.fits else "does not fit either"
    return f"{plan_flags(advice.changes)}: {format_bytes(advice.device_bytes)} per GPU, {fits}"


def render_plan(plan: Plan, console: Console) -> None:
    """The ranked rows, the cheapest's derivation and keys, the offers that hold nothing, the advice."""
    print_wrapped(
        console,
        f"{plan.model}: {len(plan.rows)} offer and GPU count(s) hold the job, cheapest first (per GPU: device memory "
        f"of the busiest rank, under a {plan.headroom:.0%} headroom; free: what is left of the GPU).",
    )
    if plan.rows:
        console.print(_rows_table(plan))
    best = plan.cheapest
    if best is not None:
        bill = best.quote
        print_wrapped(
            console,
            f"Cheapest: {bill.offer} ({bill.provider}), {bill.gpus} x {bill.device} ({bill.interconnect}), "
            f"{setting_words(best)}: {format_money(bill.total, plan.currency)}.",
        )
        print_wrapped(console, duration_words(bill.duration))
        render_bill(bill, console)
        print_wrapped(console, f"Order key (idempotency key for a retry of this same order): {bill.key}")
    for name in plan.unfit:
        print_wrapped(console, f"{name}: no setting fits on any of its GPU counts.")
    if best is None and plan.advice_offer is not None:
        print_wrapped(console, f"Nothing fits. Searched on all of {plan.advice_offer}'s GPUs, what would:")
        for advice in plan.advice:
            print_wrapped(console, f"  {_advice_line(advice)}", indent=4)
        if not plan.advice:
            print_wrapped(
                console,
                "  no change vramsim searches fits there (or the GPUs' own overheads, the CUDA context and "
                "workspaces, fill them)",
                indent=4,
            )
    print_wrapped(
        console,
        f"Prices come from the price sheet {plan.sheet}, not from vramsim; check them with the provider. "
        f"vramsim buys nothing. Request key: {plan.key}",
    )
    print_wrapped(
        console,
        f"{plan.traces} trace(s) in {plan.trace_seconds:.1f} s; GPUs alike but for their memory share them",
    )
