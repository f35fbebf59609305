"""A sweep (``vramsim sweep``) as a table, the largest fitting point of each device, or CSV."""

from __future__ import annotations

import csv
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.sweep import Sweep, SweepPoint
from vramsim.views.units import format_bytes

__all__ = ["CSV_COLUMNS", "render_sweep", "sweep_csv"]

CSV_COLUMNS = (
    "batch_size",
    "seq_len",
    "device",
    "checkpointing",
    "gpus",
    "peak_bytes",
    "reserved_bytes",
    "device_bytes",
    "usable_bytes",
    "fits",
    "answer",
    "error",
)
"""``--csv``'s columns, one row per point: ``SweepPoint``'s fields, bytes as whole numbers."""


def sweep_csv(sweep: Sweep) -> str:
    """Every point as a CSV row (``fits`` true/false, empty on the cpu or for a failed point)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for point in sweep.points:
        row = [getattr(point, column) for column in CSV_COLUMNS]
        writer.writerow(["" if value is None else str(value).lower() if isinstance(value, bool) else value for value in row])
    return out.getvalue()


def render_sweep(sweep: Sweep, console: Console) -> None:
    """The table (a column for device, checkpointing or gpus only where the sweep varies it), then the largest points."""
    points = sweep.points
    varied = [name for name in ("device", "checkpointing", "gpus") if len({getattr(p, name) for p in points}) > 1]
    fixed = [f"{name}={getattr(points[0], name)}" for name in ("device", "checkpointing", "gpus") if name not in varied]
    console.print(Text.assemble((sweep.model, "bold"), f"  task={sweep.task} {' '.join(fixed)}".rstrip()))
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in [("batch", "right"), ("seq", "right"), *((name, "left") for name in varied)]:
        table.add_column("ckpt" if name == "checkpointing" else name, justify=justify)  # type: ignore[arg-type]
    for name in ("peak", "reserved", "on device"):
        table.add_column(name, justify="right")
    table.add_column("verdict")
    table.add_column("answer")
    for point in points:
        table.add_row(
            f"{point.batch_size:,}", f"{point.seq_len:,}", *(str(getattr(point, name)) for name in varied), *_figures(point)
        )
    console.print(table)
    for line in _largest_lines(sweep, varied):
        console.print(line)
    failed = sum(p.answer == "failed" for p in points)
    derived = sum(p.answer == "derived" for p in points)
    told = f", {failed} failed (the answer column says why)" if failed else ""
    console.print(
        f"[dim]{len(points):,} points: {sweep.traces} traced, {derived:,} derived{told}, in {sweep.seconds:.1f} s[/dim]"
    )


def _figures(point: SweepPoint) -> list[str]:
    """Peak, reserved, on the device, the verdict and how the point was answered."""
    if point.answer == "failed":
        return ["-", "-", "-", "-", f"failed: {point.error}"]
    verdict = "-" if point.fits is None else "FITS" if point.fits else "OVER"
    return [
        format_bytes(point.peak_bytes or 0),
        format_bytes(point.reserved_bytes or 0),
        format_bytes(point.device_bytes or 0),
        verdict,
        point.answer,
    ]


def _largest_lines(sweep: Sweep, varied: list[str]) -> list[str]:
    """The largest fitting point of each device (and checkpointing choice and GPU count the sweep varies)."""
    groups = {(p.device, p.checkpointing, p.gpus) for p in sweep.points if p.usable_bytes is not None}
    lines = []
    best = {(p.device, p.checkpointing, p.gpus): p for p in sweep.largest}
    for key in sorted(groups, key=str):
        named = " ".join(
            f"{name}={value}" for name, value in zip(("device", "checkpointing", "gpus"), key, strict=True) if name in varied
        )
        where = f" ({named})" if named else f" on {key[0]}"
        point = best.get(key)
        if point is None:
            lines.append(f"Largest fitting{where}: none of the points fits")
        else:
            usable = format_bytes(point.usable_bytes or 0)
            lines.append(
                f"Largest fitting{where}: batch {point.batch_size:,} x seq {point.seq_len:,}, "
                f"{format_bytes(point.device_bytes or 0)} of {usable} usable ({point.answer})"
            )
    return lines
