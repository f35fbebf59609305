"""The largest fits and the strategies searched (``vramsim fit``), as lines, advice and tables."""

from __future__ import annotations

from collections import Counter

from rich import box
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from vramsim.results.device_fit import DeviceFit, DeviceVerdict
from vramsim.results.fit import Largest, LargestFit
from vramsim.results.strategy import Candidate, Refusal, RuledOut, Setting, StrategySearch
from vramsim.views.lines import print_wrapped
from vramsim.views.units import format_bytes

__all__ = ["held_flag", "largest_line", "render_device_fit", "render_fit", "render_strategies"]


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


def render_device_fit(fit: DeviceFit, console: Console) -> None:
    """The smallest catalog GPUs that hold the job, alike ones on one line; when none does, what would."""
    _print(console, Text.assemble((fit.model, "bold"), f"  on one GPU ({fit.headroom:.0%} headroom), traced for {fit.traced_on}"))
    smallest = fit.smallest
    if smallest:
        _print(console, "the smallest GPUs that hold it:", indent=2)
        for line in _verdict_lines(smallest):
            _print(console, line, indent=4)
        if not all(v.kernels_traced for v in smallest):
            _print(
                console,
                f"* replayed on {fit.traced_on}'s kernels (another compute capability or vendor): confirm with --device NAME",
                indent=2,
            )
    elif fit.devices:
        largest = max(fit.devices, key=lambda v: v.usable_bytes)
        _print(
            console,
            f"no catalog GPU holds it: the largest, {largest.device}, would take "
            f"{format_bytes(largest.device_bytes)} of {format_bytes(largest.usable_bytes)} usable",
            indent=2,
        )
    for advice in fit.advice:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in advice.changes.items())
        verdict = "fits" if advice.fits else "does not fit"
        _print(console, f"{flags}: {format_bytes(advice.device_bytes)} on each {fit.traced_on} ({verdict})", indent=2)
    if fit.refused:
        _print(console, f"not judged: {', '.join(fit.refused)} ({'; '.join(dict.fromkeys(fit.refused.values()))})", indent=2)
    _print(console, f"[dim]{len(fit.devices)} GPUs judged on one trace in {fit.trace_seconds:.2f} s[/dim]")


def _verdict_lines(verdicts: list[DeviceVerdict]) -> list[str]:
    """Devices of the same figures on one line: ``a10, a10g: 15.20 GiB of 20.14 GiB usable``."""
    alike: dict[tuple[int, int, bool], list[str]] = {}
    for v in verdicts:
        alike.setdefault((v.device_bytes, v.usable_bytes, v.kernels_traced), []).append(v.device)
    return [
        f"{', '.join(names)}: {format_bytes(nbytes)} of {format_bytes(usable)} usable{'' if traced else ' *'}"
        for (nbytes, usable, traced), names in alike.items()
    ]


def render_strategies(search: StrategySearch, console: Console, *, verbose: bool = False) -> None:
    """Every setting measured, cheapest first, and the first that fits; the layouts not tried counted by reason
    (``verbose``: each one listed). Narrow enough for 80 columns: words wrap, figures never do."""
    _print(
        console,
        Text.assemble(
            (search.model, "bold"),
            f"  on up to {search.max_gpus} x {search.target}: {format_bytes(search.usable_bytes)} usable per GPU",
        ),
    )
    best = search.cheapest
    if best is None:
        _print(console, f"no setting fits on up to {search.max_gpus} GPUs (raise --gpus, or shorten the batch)", indent=2)
    else:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in best.options().items())
        _print(console, f"cheapest that fits: {format_bytes(best.device_bytes)} on each device, with", indent=2)
        _print(console, flags, indent=4)
    _print(console, "Tried, cheapest first (fewest GPUs, least compute lost, least communication):")
    _print(console, _candidates_table(search.candidates))
    _print(
        console,
        "[dim]device: what nvidia-smi shows; lost: recomputed FLOPs and the pipeline's bubble as a share of the "
        "step; sent: bytes each rank sends per micro-batch[/dim]",
    )
    for line in _refusal_lines(search.refused, verbose=verbose):
        _print(console, line, indent=2)
    if verbose:
        for ruled in search.ruled_out:
            _print(console, _ruled_out_line(ruled, search.usable_bytes), indent=2)
    _print(
        console,
        f"[dim]{len(search.candidates)} settings measured ({search.skipped} skipped: their full checkpointing "
        f"does not fit, or a cheaper one fits; {len(search.ruled_out)} ruled out before measuring: their least "
        f"memory is over the usable{'' if verbose else ', --verbose lists them'}) from {search.traces} trace(s) "
        f"in {search.trace_seconds:.2f} s[/dim]",
    )


def _candidates_table(candidates: list[Candidate]) -> Table:
    """One row per setting: the layout's words wrap, the figures are never cut (``no_wrap``)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=0)
    for name in ("GPUs", "layout", "scheme", "checkpointing", "device", "lost", "sent", "fits"):
        words = name in ("layout", "scheme", "checkpointing")
        table.add_column(
            name, justify="left" if words else "right", no_wrap=not words, overflow="fold", min_width=len(name) if words else None
        )
    for c in candidates:
        plan = c.checkpointing if c.plan == c.checkpointing else f"{c.checkpointing}: {c.plan}"
        table.add_row(
            str(c.gpus),
            _layout(c),
            c.scheme,
            plan.replace("+", "+ "),
            format_bytes(c.device_bytes),
            f"{c.recomputed + c.bubble:.1%}",
            format_bytes(int(c.communication)),
            "yes" if c.fits else "no",
        )
    return table


def _print(console: Console, renderable: RenderableType, *, indent: int = 0) -> None:
    """``renderable`` ``indent`` spaces in: a line (markup is read) wrapped as ``print_wrapped`` wraps, a table
    line by line without the spaces rich pads its lines with."""
    if isinstance(renderable, (str, Text)):
        text = Text.from_markup(renderable) if isinstance(renderable, str) else renderable
        print_wrapped(console, Text(" " * indent) + text, indent=indent)
        return
    for line in console.render_lines(Padding(renderable, (0, 0, 0, indent)), pad=False):
        text = Text.assemble(*((segment.text, segment.style or "") for segment in line))
        text.rstrip()
        console.print(text)


def _refusal_lines(refused: list[Refusal], *, verbose: bool) -> list[str]:
    """The layouts not tried: a line per reason with how many, or (``verbose``) a line per layout."""
    if verbose:
        return [f"not tried: {_refused_layout(r)}: {r.reason}" for r in refused]
    counts = Counter(r.reason for r in refused)
    lines = [f"not tried ({n} layout{'s' if n > 1 else ''}): {reason}" for reason, n in counts.items()]
    return [*lines, "(--verbose lists each layout not tried)"] if lines else []


def _refused_layout(refusal: Refusal) -> str:
    """``TP 8 x PP 16, FSDP2 full on 128 GPUs``, or the rank's degrees alone when its trace was refused."""
    parts = [f"{name.upper()} {getattr(refusal, name)}" for name in ("tp", "pp", "cp", "ep") if getattr(refusal, name) > 1]
    layout = " x ".join(parts) or "one rank"
    if refusal.gpus is None:
        return f"{layout} (every setting)"
    return f"{layout}, {refusal.scheme} on {refusal.gpus} GPUs"


def _ruled_out_line(ruled: RuledOut, usable: int) -> str:
    """``ruled out: TP 8 x CP 2, FSDP2 full, checkpointing none on 64 GPUs: at least 80.12 GiB > 71.53 GiB usable``."""
    return (
        f"ruled out: {_layout(ruled)}, {ruled.scheme}, checkpointing {ruled.checkpointing} on {ruled.gpus} GPUs: "
        f"at least {format_bytes(ruled.bound_bytes)} > {format_bytes(usable)} usable"
    )


def _layout(setting: Setting) -> str:
    """``TP 2 x PP 2 (1f1b)``, or ``-`` for data parallelism alone."""
    parts = [f"{name.upper()} {getattr(setting, name)}" for name in ("tp", "pp", "cp", "ep") if getattr(setting, name) > 1]
    schedule = f" ({setting.pp_schedule.replace('-', ' ')})" if setting.pp_schedule else ""
    return " x ".join(parts) + schedule if parts else "-"
