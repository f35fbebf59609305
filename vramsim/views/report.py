"""A Report as the terminal shows it (rich), for ``vramsim trace`` and as text for ``str(report)`` and ``report.render()``."""

from __future__ import annotations

import io
import re
from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.errors import ConfigError
from vramsim.results.report import AllocatorPressure, Report
from vramsim.views.advice import advice_line
from vramsim.views.folding import PEFT_PREFIX, fold_layers, without_peft_prefix
from vramsim.views.lines import print_wrapped
from vramsim.views.trimmed import trimmed_lines
from vramsim.views.units import format_bytes

__all__ = ["render_report", "render_summary", "report_text", "saved_cell"]


def render_summary(report: Report, console: Console) -> None:
    """The choices simulated, the peak, the verdict and the advice: ``print(report)`` in Python."""
    opts = report.options
    print_wrapped(
        console,
        Text.assemble(
            (f"{report.model}", "bold"),
            f" (config of {report.config_of}, same architecture)" if report.config_of else "",
            (
                f"  task={report.task} target={report.target} batch={opts.get('batch_size')} seq={opts.get('seq_len')}"
                f" checkpointing={opts.get('checkpointing')}"
                + (f" attention={opts['attn_implementation']}" if opts.get("attn_implementation") else "")
                if not report.components
                else f"  task={report.task} target={report.target} {opts.get('height')}x{opts.get('width')}"
                + (
                    f" batch={opts.get('batch_size')} checkpointing={opts.get('checkpointing')}"
                    if report.task == "train"
                    else f" steps={opts.get('num_inference_steps')} images={opts.get('num_images')}"
                    + (f" frames={opts['num_frames']}" if opts.get("num_frames") else "")
                    + f" guidance={opts.get('guidance_scale')}"
                )
            )
            + (f" gpus={opts.get('gpus')} {report.ranks.scheme}" if report.ranks else ""),
            f"  parameters={report.parameters:,}"
            + (f" per rank ({report.model_parameters:,} in the whole model)" if report.model_parameters else ""),
        ),
    )
    if report.settings:
        print_wrapped(console, "Simulated with: " + ", ".join(f"{name} {value}" for name, value in report.settings.items()))
    at = report.peak_at
    module = without_peft_prefix(at.module)
    where = f"step {at.step}, {at.phase}, {at.op}" + (f" in {module}" if module else "")
    print_wrapped(
        console,
        Text.assemble("Peak allocated (max_memory_allocated): ", (format_bytes(report.peak_bytes), "bold"), f"  at {where}"),
    )
    print_wrapped(
        console,
        f"Reserved by the allocator: {format_bytes(report.reserved_bytes)}   "
        f"{_device_label(report.target).capitalize()}: {format_bytes(report.device_bytes)}",
    )
    if report.paged_bytes:
        print_wrapped(
            console,
            f"Paged optimizer states (managed memory, outside the allocator): {format_bytes(report.paged_bytes)}, "
            "assumed resident, counted in the device figure only",
        )
    if report.fits is not None and report.capacity_bytes is not None:
        usable = report.capacity_bytes * (1 - report.headroom)
        paging = report.fits and report.device_bytes > usable
        verdict = ("FITS", "bold green") if report.fits else ("DOES NOT FIT", "bold red")
        print_wrapped(
            console,
            Text.assemble(
                verdict,
                f" on {report.target}: {format_bytes(report.device_bytes)} of "
                f"{format_bytes(int(usable))} usable ({report.headroom:.0%} headroom)"
                + (
                    f", paging up to {format_bytes(int(report.device_bytes - usable))} of optimizer states to the host"
                    if paging
                    else ""
                ),
            ),
        )
        if report.allocator_pressure is not None:
            print_wrapped(console, _pressure(report.allocator_pressure), indent=4)
        for advice in report.advice:
            print_wrapped(console, f"  try: {advice_line(advice)}", indent=4)


def render_report(report: Report, console: Console, *, fold: bool = True, took: tuple[float, int] | None = None) -> None:
    """What ``vramsim trace`` prints: the summary, the tables (alike layers folded unless ``fold`` is
    False), the assumptions; last, with ``took``, the whole command's seconds and traces (0: the result cache
    answered), else this trace's."""
    render_summary(report, console)
    if report.components:
        _print_table(console, _components(report))
    if report.ranks is not None:
        _print_table(console, _ranks(report))
    if report.checkpointing:
        _print_table(console, _checkpointing(report, console.width))
    _print_table(console, _breakdown(report))
    _print_table(console, _layers(report, console, fold))
    if report.assumptions:
        console.print("Assumptions:")
        for item in report.assumptions:
            print_wrapped(console, f"  - {item.name}: {item.detail}", indent=4)
    if took is None:
        console.print(f"[dim]traced in {report.trace_seconds:.2f} s[/dim]")
    else:
        traces = f"{took[1]} trace{'s' if took[1] > 1 else ''}" if took[1] else "answered from the result cache"
        console.print(f"[dim]{took[0]:.1f} s in all, {traces}[/dim]")


def _print_table(console: Console, table: Table) -> None:
    """A table with its title above and its caption lines below, each wrapped to the console's width as a
    line of text is (rich would wrap them to the table's width and pad them with spaces)."""
    title, caption = table.title, table.caption
    table.title = table.caption = None
    if title:
        print_wrapped(console, str(title))
    console.print(table)
    for line in str(caption or "").splitlines():
        print_wrapped(console, line)


def _device_label(target: str) -> str:
    """What shows ``device_bytes`` on the target: nvidia-smi, rocm-smi, or the process on the cpu."""
    from vramsim.estimators.devices import get_device

    vendor = get_device(target).vendor
    return {"cpu": "in host memory (the process)", "amd": "on the device (rocm-smi)"}.get(vendor, "on the device (nvidia-smi)")


def report_text(
    report: Report, *, summary: bool = False, layers: Literal["fold", "all"] = "fold", width: int | None = None
) -> str:
    """What ``vramsim trace`` prints, as text: the summary, the tables and the assumptions; ``summary``: the
    lines above the tables, then the warnings (which the CLI puts on stderr). ``layers="all"`` gives one row per
    layer (the CLI's ``--layers all``); ``width`` None: $COLUMNS, else 80. ``print(vramsim.report_text(report))``
    in Python shows what the command line shows."""
    if layers not in ("fold", "all"):
        raise ConfigError(f"unknown layers {layers!r}; choose one of: fold, all")
    text = io.StringIO()
    console = Console(file=trimmed_lines(text), width=width, color_system=None, highlight=False)
    if summary:
        render_summary(report, console)
        return text.getvalue() + "".join(f"warning: {line}\n" for line in report.warnings)
    render_report(report, console, fold=layers == "fold")
    return text.getvalue()


def _components(report: Report) -> Table:
    """A pipeline's components, each with the peak while it runs; the largest sets the pipeline's."""
    top = max(report.components, key=lambda c: c.peak_bytes)
    table = Table(title=f"Pipeline components (the peak is set by {top.name}, {top.phase})", title_justify="left")
    for name in ("component", "phase", "peak while running", "weights"):
        table.add_column(name, justify="left" if name in ("component", "phase") else "right", no_wrap=True)
    for component in report.components:
        table.add_row(component.name, component.phase, format_bytes(component.peak_bytes), format_bytes(component.weights_bytes))
    return table


def _ranks(report: Report) -> Table:
    """One rank's figures: pure data parallelism gives every rank the same."""
    ranks = report.ranks
    assert ranks is not None
    alike = "every rank holds the same; one rank's figures" if ranks.ranks_alike else "rank 0's figures"
    if ranks.busiest_stage is not None:
        alike = f"the busiest pipeline stage's figures: stage {ranks.busiest_stage}"
    if ranks.busiest_device is not None:
        alike = f"the busiest GPU's figures: GPU {ranks.busiest_device}"
    table = Table(title=f"Per rank: {ranks.scheme} over {ranks.gpus} GPUs ({alike})", title_justify="left")
    table.add_column("per rank")
    table.add_column("", justify="right")  # bytes, and a count or a verdict
    for category, nbytes in ranks.model_state.items():
        table.add_row(
            f"{category} (held between steps)" if category != "gradients" else "gradients (one step)", format_bytes(nbytes)
        )
    buckets = [nbytes for name, nbytes in ranks.buffers.items() if name.startswith("DDP bucket ")]
    if buckets:  # one row for DDP's buckets (a large model has hundreds; --json lists each)
        table.add_row(f"communication: DDP buckets x{len(buckets)} (kept for the run)", format_bytes(sum(buckets)))
    for name, nbytes in ranks.buffers.items():
        if not name.startswith("DDP bucket "):
            table.add_row(f"communication: {name}", format_bytes(nbytes))
    if ranks.gathered_elements:
        table.add_row("most weights gathered at once", f"{ranks.gathered_elements:,} elements")
    for kind, nbytes in ranks.host.items():
        table.add_row(f"host memory (CPU offload, not on the device): {kind}", format_bytes(nbytes))
    table.add_row("peak allocated", format_bytes(report.peak_bytes))
    table.add_row(_device_label(report.target), format_bytes(report.device_bytes))
    for stage in ranks.stages:
        table.add_row(
            f"stage {stage.rank}: {len(stage.layers)} layers, {format_bytes(stage.held_bytes)} held per "
            f"micro-batch x {stage.in_flight:g} in flight",
            f"{format_bytes(stage.device_bytes)}{_fits_suffix(stage.fits)}",
        )
    for device in ranks.devices:
        table.add_row(
            f"GPU {device.device}: {len(device.modules)} modules, weights {format_bytes(device.parameter_bytes)}, "
            f"KV cache {format_bytes(device.kv_cache_bytes)} ({format_bytes(device.max_memory_bytes)} offered)",
            f"{format_bytes(device.device_bytes)}{_fits_suffix(device.fits)}",
        )
    if report.fits is not None:
        table.add_row("fits", "yes" if report.fits else "no")
    return table


def _fits_suffix(fits: bool | None) -> str:
    """A stage's or a placed GPU's verdict after its figure; none on the cpu target."""
    return "" if fits is None else (", fits" if fits else ", does not fit")


def _checkpointing(report: Report, width: int) -> Table:
    """Each choice's figures; a choice longer than its column's room breaks after a ``:`` or ``+`` (the
    figures never give way)."""
    auto = report.options.get("checkpointing") == "auto"
    title = (
        "Activation checkpointing: auto's choice, per layer"
        if auto
        else "Activation checkpointing, each choice from this one trace"
    )
    headers = ("peak", "device", "fits", "recomputed", "TFLOP", "to host")
    cells = [
        (
            format_bytes(choice.peak_bytes),
            format_bytes(choice.device_bytes),
            "-" if choice.fits is None else ("yes" if choice.fits else "no"),
            f"{choice.cost.recomputed_ops:,}",
            f"{choice.cost.recomputed_flops / 1e12:,.1f}",
            format_bytes(choice.cost.offloaded_bytes),
        )
        for choice in report.checkpointing
    ]
    widths = [max([len(header)] + [len(cell[i]) for cell in cells]) for i, header in enumerate(headers)]
    room = width - sum(widths) - 3 * (len(headers) + 1) - 1
    table = Table(title=title, title_justify="left")
    table.add_column("choice", overflow="fold")
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for choice, cell in zip(report.checkpointing, cells, strict=True):
        table.add_row(_broken(choice.checkpointing, room), *cell)
    return table


def _broken(spec: str, room: int) -> str:
    """A checkpointing choice on as few lines of ``room`` as its parts allow, broken after ``:`` or ``+``
    (``selective:`` / ``torchtitan``), never inside a part."""
    lines = [""]
    for part in re.findall(r"[^:+]+[:+]?", spec):
        if lines[-1] and len(lines[-1]) + len(part) > room:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _breakdown(report: Report) -> Table:
    table = Table(title="At the peak (the same moment, counted as the peak is)", title_justify="left")
    table.add_column("category")
    table.add_column("bytes", justify="right")
    table.add_column("share", justify="right")
    for category, nbytes in report.breakdown.items():
        table.add_row(category, format_bytes(nbytes), f"{nbytes / max(report.peak_bytes, 1):.1%}")
    return table


def _layers(report: Report, console: Console, fold: bool) -> Table:
    """One row per module, alike layers folded (``folding.py``); the module column gives way to the numbers."""
    rows = fold_layers(report.layers, fold=fold)
    peft = bool(rows) and all(row.module.startswith(PEFT_PREFIX) for row in rows)
    folded = "; xN: N alike layers, figures per layer" if any(row.count > 1 for row in rows) else ""
    cells = [
        (
            f"{row.parameters:,}",
            format_bytes(row.parameter_bytes),
            saved_cell(*row.activation_bytes),
            format_bytes(row.peak_bytes) if row.peak_bytes else "-",
        )
        for row in rows
    ]
    headers = ("parameters", "param\nbytes", "saved\nactivations", "peak while\nrunning")
    widths = [
        max([len(line) for line in header.split("\n")] + [len(cell[i]) for cell in cells]) for i, header in enumerate(headers)
    ]
    room = max(console.width - sum(widths) - 3 * (len(headers) + 1) - 1, _MODULE_MIN_WIDTH)
    notes = ["\u2264: its layers differ, the most one saves"] if any("\u2264" in cell[2] for cell in cells) else []
    notes += [f"module names without peft's {PEFT_PREFIX} prefix"] if peft else []
    caption = "\n".join(notes) or None
    table = Table(title=f"Per layer (steady-state step{folded})", title_justify="left", caption=caption, caption_justify="left")
    table.add_column("module", overflow="fold")
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    components = {component.name for component in report.components}
    heading = None
    for row, cell in zip(rows, cells, strict=True):
        name = row.module.removeprefix(PEFT_PREFIX) if peft else row.module
        component, _, inner = name.partition(".")
        if component in components and inner:  # a pipeline's rows under their component's name, which a cut would lose
            if component != heading:
                table.add_row(Text(component, style="bold"), *("" for _ in headers))
                heading = component
            table.add_row("  " + _left_ellipsis(inner, room - 2), *cell)
        else:
            table.add_row(_left_ellipsis(name, room), *cell)
    return table


_MODULE_MIN_WIDTH = 12
"""Below this the module column wraps rather than lose its name to the ellipsis."""


def _left_ellipsis(name: str, width: int) -> str:
    """The end of a module path is what tells rows apart (``...layers.0-31 x32``): cut from the left."""
    return name if len(name) <= width else "…" + name[len(name) - width + 1 :]


def saved_cell(least: int, most: int) -> str:
    """One layer's saved bytes over a folded run; ``<=`` marks a run whose layers differ (layer 0's
    input is the embedding's output), with the most one of them saves."""
    most_text = format_bytes(most)
    return most_text if format_bytes(least) == most_text else f"\u2264{most_text}"


def _pressure(pressure: AllocatorPressure) -> str:
    """What the caching allocator does within the usable memory, where the unlimited replay reserves more."""
    within = f"within {format_bytes(pressure.limit_bytes)} for the allocator"
    unlimited = (
        f"unlimited, the allocator would reserve {format_bytes(pressure.unlimited_reserved_bytes)} "
        f"({format_bytes(pressure.unlimited_device_bytes)} on the device)"
    )
    if pressure.oom_at is not None:
        line = f"  out of memory at {pressure.oom_at} even after emptying the cache ({within}; {unlimited})"
    else:
        line = (
            f"  fits under allocator pressure, the figures above are its replay {within}: the cache is emptied "
            f"{pressure.retries} time(s) to retry a cudaMalloc, each a device-wide synchronisation ({unlimited})"
        )
    if pressure.expandable_retries is not None:
        line += (
            f"; --expandable-segments runs it with {pressure.expandable_retries} retries"
            if pressure.expandable_retries
            else "; --expandable-segments runs it without emptying the cache"
        )
    return line
