"""A Comparison as the terminal shows it (``vramsim compare``): a row per variant, the figures ``trace`` prints."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.compare import Compared, Comparison, ServeComparison
from vramsim.views.compare_serving import render_serve_comparison
from vramsim.views.lines import print_wrapped, wrap
from vramsim.views.trimmed import trimmed_lines
from vramsim.views.units import format_bytes

__all__ = ["compare_text", "render_comparison"]

_SHARED_ONLY = "(shared flags)"
"""The row of the variant with no flags of its own (``""``)."""


def render_comparison(comparison: Comparison, console: Console) -> None:
    """The job, a row per variant (peak, reserved, device, fits, the largest category at the peak), what each column
    counts, and the traces it took."""
    reports = [each.report for each in comparison.variants]
    common = {f"task={r.task} target={r.target}" for r in reports}
    heading = f"  {common.pop()}" if len(common) == 1 else ""
    print_wrapped(console, Text.assemble((comparison.model, "bold"), heading))
    headers = ("peak", "reserved", "device", "fits", "largest at the peak")
    cells = [_cells(each) for each in comparison.variants]
    widths = [max(len(header), *(len(cell[i]) for cell in cells)) for i, header in enumerate(headers)]
    room = max(console.width - sum(widths) - 2 * len(headers), len("variant"))  # a gap of two before each column
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("variant", overflow="fold")
    for header in headers:
        table.add_column(header, justify="left" if header == headers[-1] else "right", no_wrap=True)
    for each, cell in zip(comparison.variants, cells, strict=True):
        label = "\n".join(line.plain for line in wrap(each.label or _SHARED_ONLY, room))  # the lines after the first indented
        table.add_row(label, *cell)
    console.print(table)
    print_wrapped(
        console,
        "peak: allocated (max_memory_allocated); reserved: by the caching allocator; device: what nvidia-smi shows "
        "(one rank's, with --gpus)",
    )
    for line in sorted(_usable_lines(comparison)):
        print_wrapped(console, line)
    count = len(comparison.variants)
    traces = f"{comparison.traces} trace{'s' if comparison.traces > 1 else ''}"
    console.print(f"[dim]{count} variants from {traces} in {comparison.trace_seconds:.1f} s[/dim]")


def compare_text(comparison: Comparison | ServeComparison, *, width: int | None = None) -> str:
    """What ``vramsim compare`` (``compare --serve``, for a ``ServeComparison``) prints, as text; ``width`` None:
    $COLUMNS, else 80. ``print(vramsim.compare_text(c))`` in Python shows what the command line shows."""
    text = io.StringIO()
    console = Console(file=trimmed_lines(text), width=width, color_system=None, highlight=False)
    if isinstance(comparison, ServeComparison):
        render_serve_comparison(comparison, console)
    else:
        render_comparison(comparison, console)
    return text.getvalue()


def _cells(each: Compared) -> tuple[str, ...]:
    """One variant's figures, its verdict, and the category that holds the most at the peak with its share."""
    report = each.report
    fits = "-" if report.fits is None else ("yes" if report.fits else "no")
    largest = max(report.breakdown.items(), key=lambda item: item[1], default=None)
    held = "-" if largest is None else f"{largest[0]} {largest[1] / max(report.peak_bytes, 1):.0%}"
    figures = (report.peak_bytes, report.reserved_bytes, report.device_bytes)
    return (*map(format_bytes, figures), fits, held)


def _usable_lines(comparison: Comparison) -> set[str]:
    """What "fits" weighs the device figure against, once per target and headroom the variants use."""
    return {
        f"fits: within {format_bytes(int(r.capacity_bytes * (1 - r.headroom)))} on {r.target} ({r.headroom:.0%} headroom)"
        for r in (each.report for each in comparison.variants)
        if r.fits is not None and r.capacity_bytes is not None
    }
