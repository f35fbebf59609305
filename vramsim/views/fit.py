"""The largest fits and the strategies searched (``vramsim fit``), as lines, advice and tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.fit import Largest, LargestFit
from vramsim.results.strategy import Candidate, StrategySearch
from vramsim.views.units import format_bytes

__all__ = ["held_flag", "largest_line", "render_fit", "render_strategies"]


def largest_line(largest: Largest, held: str, *, advice: bool = False) -> str:
    """One searched option: its largest fitting value and the traced value after it (``advice``: worded as a change)."""
    flag = "--" + largest.option.replace("_", "-")
    if largest.value is None:
        smallest = f"{largest.over or 1:,} takes {format_bytes(largest.over_bytes or 0)}"
        return f"no {flag} fits at {held}: {smallest} on the device (traced)"
    named = f"{flag} {largest.value:,} (the largest at {held}, traced)" if advice else f"{flag} {largest.value:,} at {held}"
    line = f"{named}: {format_bytes(largest.device_bytes or 0)} on the device"
    if largest.value == largest.bound:
        limit = "vramsim's limit" if largest.bound_by == "vramsim's limit" else f"the model's {largest.bound_by}"
        return f"{line}, the longest tried ({limit})"
    if largest.over is None:
        return f"{line}; the search stopped before a size that does not fit"
    between = "" if largest.exact else " (the sizes between not traced)"
    step = f" (searched in steps of {largest.step})" if largest.step > 1 else ""
    return f"{line}; {largest.over:,} takes {format_bytes(largest.over_bytes or 0)}{between or step}"


def held_flag(name: str, value: int) -> str:
    """The size a search held at its given value, as the command line spells it: ``--seq-len 2,048``."""
    return f"--{name.replace('_', '-')} {value:,}"


def _largest_lines(fit: LargestFit, *, advice: bool = False) -> list[str]:
    held = {"batch_size": held_flag("seq_len", fit.given["seq_len"]), "seq_len": held_flag("batch_size", fit.given["batch_size"])}
    return [largest_line(each, held[each.option], advice=advice) for each in (fit.batch_size, fit.seq_len) if each]


def render_fit(fit: LargestFit, console: Console) -> None:
    """The largest batch size and sequence length that fit, each a traced run."""
    console.print(
        Text.assemble(
            (fit.model, "bold"), f"  on {fit.target}: {format_bytes(fit.usable_bytes)} usable ({fit.headroom:.0%} headroom)"
        )
    )
    for line in _largest_lines(fit):
        console.print(f"  largest {line}")
    console.print(f"[dim]each figure from a trace: {fit.traces} traced in {fit.trace_seconds:.2f} s[/dim]")


def render_strategies(search: StrategySearch, console: Console) -> None:
    """Every setting measured, cheapest first, and the first that fits."""
    console.print(
        Text.assemble(
            (search.model, "bold"),
            f"  on up to {search.max_gpus} x {search.target}: {format_bytes(search.usable_bytes)} usable per GPU",
        )
    )
    best = search.cheapest
    if best is None:
        console.print(f"  no setting fits on up to {search.max_gpus} GPUs (raise --gpus, or shorten the batch)")
    else:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in best.options().items())
        console.print(f"  cheapest that fits: {flags}: {format_bytes(best.device_bytes)} on each device")
    table = Table(title="Tried, cheapest first (fewest GPUs, least compute lost, least communication)", title_justify="left")
    for name in ("gpus", "layout", "scheme", "checkpointing", "peak", "on the device", "lost", "sent", "fits"):
        table.add_column(name, justify="left" if name in ("layout", "scheme", "checkpointing", "fits") else "right", no_wrap=True)
    for c in search.candidates:
        plan = c.checkpointing if c.plan == c.checkpointing else f"{c.checkpointing}: {c.plan}"
        lost, sent = f"{c.recomputed + c.bubble:.1%}", format_bytes(int(c.communication))
        table.add_row(
            str(c.gpus),
            _layout(c),
            c.scheme,
            plan,
            format_bytes(c.peak_bytes),
            format_bytes(c.device_bytes),
            lost,
            sent,
            "yes" if c.fits else "no",
        )
    console.print(table)
    console.print(
        "[dim]peak: allocated (max_memory_allocated); lost: recomputed FLOPs and the pipeline's bubble as a "
        "share of the step; sent: bytes each rank sends per micro-batch[/dim]"
    )
    for note in search.notes:
        console.print(f"  not tried: {note}")
    console.print(
        f"[dim]{len(search.candidates)} settings measured ({search.skipped} skipped: their full checkpointing "
        f"does not fit, or a cheaper one fits) from {search.traces} trace(s) in {search.trace_seconds:.2f} s[/dim]"
    )


def _layout(candidate: Candidate) -> str:
    """``TP 2 x PP 2 (1f1b)``, or ``-`` for data parallelism alone."""
    parts = [f"{name.upper()} {getattr(candidate, name)}" for name in ("tp", "pp", "cp", "ep") if getattr(candidate, name) > 1]
    schedule = f" ({candidate.pp_schedule})" if candidate.pp_schedule else ""
    return " x ".join(parts) + schedule if parts else "-"
