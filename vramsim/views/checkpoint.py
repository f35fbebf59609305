"""A CheckpointReport (``vramsim checkpoint``) as the terminal shows it: the files, the memory, the verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.checkpoint import CheckpointReport
from vramsim.views.units import format_bytes

__all__ = ["render_checkpoint"]


def render_checkpoint(report: CheckpointReport, console: Console) -> None:
    """The checkpoint folder file by file, then the save and the restore on the device and on the host, the verdict."""
    console.print(Text.assemble((report.model, "bold"), f"  checkpoint of {report.optimizer} training on {report.target}"))
    files = Table(title="On disk", title_justify="left")
    for name in ("file", "bytes", "size", "holds"):
        files.add_column(name, justify="right" if name in ("bytes", "size") else "left")
    for saved in report.files:
        copies = f" (x{saved.copies}, one per rank)" if saved.copies > 1 else ""
        copies += f" (rank {saved.rank})" if saved.rank is not None else ""
        files.add_row(saved.name, f"{saved.bytes:,}", format_bytes(saved.bytes), saved.holds + copies)
    files.add_row("total", f"{report.disk_bytes:,}", format_bytes(report.disk_bytes), "", style="bold")
    console.print(files)
    memory = Table(title="Memory", title_justify="left")
    for name in ("moment", "allocated", "device", "host"):
        memory.add_column(name, justify="left" if name == "moment" else "right")
    memory.add_row(
        "save", format_bytes(report.save_peak_bytes), format_bytes(report.save_device_bytes), format_bytes(report.save_host_bytes)
    )
    restore = "restore" if report.save_format in ("dcp", "deepspeed") else f"restore (map_location={report.map_location})"
    memory.add_row(
        restore,
        format_bytes(report.restore_peak_bytes),
        format_bytes(report.restore_device_bytes),
        format_bytes(report.restore_host_bytes),
    )
    memory.add_row("next training step", "", format_bytes(report.train_device_bytes), "")
    console.print(memory)
    held = ", ".join(f"{name} {format_bytes(nbytes)}" for name, nbytes in report.restore_breakdown.items() if nbytes)
    console.print(f"At the restore's peak: {held}")
    if report.fits is not None and report.capacity_bytes is not None:
        usable = format_bytes(int(report.capacity_bytes * (1 - report.headroom)))
        verdict = "[bold green]fit[/]" if report.fits else "[bold red]do not fit[/]"
        console.print(
            f"Restore and the step after it {verdict} on {report.target} ({usable} usable of "
            f"{format_bytes(report.capacity_bytes)})"
        )
    console.print("Assumptions:")
    for item in report.assumptions:
        console.print(f"  - {item.name}: {item.detail}" + (f" ({format_bytes(item.bytes)})" if item.bytes else ""))
    console.print(f"[dim]traced in {report.trace_seconds:.2f} s[/dim]")
