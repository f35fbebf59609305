"""Terminal views of a Report (rich); the CLI is the only caller."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .report import Report
from .validation import Validation

__all__ = ["format_bytes", "render_devices", "render_report", "render_validations"]


def format_bytes(nbytes: int) -> str:
    """Binary units, as nvidia-smi and torch.cuda.memory_summary print them."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def render_report(report: Report, console: Console) -> None:
    opts = report.options
    console.print(
        Text.assemble(
            (f"{report.model}", "bold"),
            f"  task={report.task} target={report.target} batch={opts.get('batch_size')} seq={opts.get('seq_len')}"
            f" checkpointing={opts.get('checkpointing')}"
            + (f" gpus={opts.get('gpus')} {report.ranks.scheme}" if report.ranks else ""),
            f"  parameters={report.parameters:,}",
        )
    )
    at = report.peak_at
    where = f"step {at.step}, {at.phase}, {at.op}" + (f" in {at.module}" if at.module else "")
    console.print(Text.assemble("Peak allocated (max_memory_allocated): ", (format_bytes(report.peak_bytes), "bold"),
                                f"  at {where}"))  # fmt: skip
    console.print(f"Reserved by the allocator: {format_bytes(report.reserved_bytes)}   "
                  f"On the device (nvidia-smi): {format_bytes(report.device_bytes)}")  # fmt: skip
    if report.fits is not None and report.capacity_bytes is not None:
        usable = report.capacity_bytes * (1 - report.headroom)
        verdict = "[bold green]FITS[/]" if report.fits else "[bold red]DOES NOT FIT[/]"
        console.print(f"{verdict} on {report.target}: {format_bytes(report.device_bytes)} of "
                      f"{format_bytes(int(usable))} usable ({report.headroom:.0%} headroom)")  # fmt: skip
        for hint in report.advice:
            console.print(f"  try: {hint}")
    if report.ranks is not None:
        console.print(_ranks(report))
    if report.checkpointing:
        console.print(_checkpointing(report))
    console.print(Group(_breakdown(report), _layers(report)))
    if report.assumptions:
        console.print("Assumptions:")
        for item in report.assumptions:
            console.print(f"  - {item.name}: {item.detail}")
    console.print(f"[dim]traced in {report.trace_seconds:.2f} s[/dim]")


def _ranks(report: Report) -> Table:
    """One rank's figures: pure data parallelism gives every rank the same."""
    ranks = report.ranks
    assert ranks is not None
    alike = "every rank holds the same; one rank's figures" if ranks.ranks_alike else "rank 0's figures"
    table = Table(title=f"Per rank: {ranks.scheme} over {ranks.gpus} GPUs ({alike})", title_justify="left")
    table.add_column("per rank")
    table.add_column("bytes", justify="right")
    for category, nbytes in ranks.model_state.items():
        table.add_row(f"{category} (held between steps)" if category != "gradients" else "gradients (one step)",
                      format_bytes(nbytes))  # fmt: skip
    for name, nbytes in ranks.buffers.items():
        table.add_row(f"communication: {name}", format_bytes(nbytes))
    if ranks.gathered_elements:
        table.add_row("most weight elements gathered at once", f"{ranks.gathered_elements:,}")
    table.add_row("peak allocated", format_bytes(report.peak_bytes))
    table.add_row("on the device (nvidia-smi)", format_bytes(report.device_bytes))
    if report.fits is not None:
        table.add_row("fits", "yes" if report.fits else "no")
    return table


def _checkpointing(report: Report) -> Table:
    table = Table(title="Activation checkpointing, each choice from this one trace", title_justify="left")
    for name in ("choice", "peak", "reserved", "device", "fits", "recomputed", "TFLOP", "to host"):
        table.add_column(name, justify="left" if name == "choice" else "right")
    for choice in report.checkpointing:
        fits = "-" if choice.fits is None else ("yes" if choice.fits else "no")
        table.add_row(choice.checkpointing, format_bytes(choice.peak_bytes), format_bytes(choice.reserved_bytes),
                      format_bytes(choice.device_bytes), fits, f"{choice.recomputed_ops:,}",
                      f"{choice.recomputed_flops / 1e12:,.2f}", format_bytes(choice.offloaded_bytes))  # fmt: skip
    return table


def _breakdown(report: Report) -> Table:
    table = Table(title="At the peak (the same moment, counted as the peak is)", title_justify="left")
    table.add_column("category")
    table.add_column("bytes", justify="right")
    table.add_column("share", justify="right")
    for category, nbytes in report.breakdown.items():
        table.add_row(category, format_bytes(nbytes), f"{nbytes / max(report.peak_bytes, 1):.1%}")
    return table


def _layers(report: Report) -> Table:
    table = Table(title="Per layer (steady-state step)", title_justify="left")
    widest = max((len(row.module) for row in report.layers), default=6)
    table.add_column("module", no_wrap=True, min_width=min(widest, 40))
    for name in ("parameters", "param bytes", "saved activations", "peak while running"):
        table.add_column(name, justify="right")
    for row in report.layers:
        table.add_row(
            row.module,
            f"{row.parameters:,}",
            format_bytes(row.parameter_bytes),
            format_bytes(row.activation_bytes),
            format_bytes(row.peak_bytes) if row.peak_bytes else "-",
        )
    return table


def render_devices(console: Console) -> None:
    from vramsim.estimators.devices import DEVICES

    table = Table(title="Target devices", title_justify="left")
    for name in ("name", "device", "memory", "arch", "bf16"):
        table.add_column(name)
    for profile in DEVICES.values():
        memory = format_bytes(profile.memory_bytes) if profile.memory_bytes else "host RAM"
        arch = profile.gfx_arch or (f"sm_{profile.compute_capability[0]}{profile.compute_capability[1]}"
                                    if profile.compute_capability else profile.architecture)  # fmt: skip
        table.add_row(profile.name, profile.label, memory, arch, "yes" if profile.supports_bf16 else "no")
    console.print(table)


def render_validations(results: list[Validation], console: Console) -> None:
    table = Table(title="Predicted vs measured (steady-state peak)", title_justify="left")
    for name in ("model", "device", "predicted", "measured", "error"):
        table.add_column(name, justify="left" if name in ("model", "device") else "right")
    for result in results:
        table.add_row(result.model, result.device, format_bytes(result.predicted_bytes),
                      format_bytes(result.measured_bytes), f"{result.error:+.3%}")  # fmt: skip
    console.print(table)
