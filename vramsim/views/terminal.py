"""Terminal views of a Report (rich), for the CLI and as text for ``str(report)`` and ``report.render()``."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from vramsim.results.checkpoint import CheckpointReport
from vramsim.results.fit import Largest, LargestFit
from vramsim.results.report import AllocatorPressure, Report
from vramsim.results.serving import ServeReport
from vramsim.results.validation import Validation
from vramsim.search.strategy import Candidate, StrategySearch
from vramsim.views.folding import PEFT_PREFIX, fold_layers

__all__ = [
    "fit_advice", "format_bytes", "render_checkpoint", "render_devices", "render_fit", "render_report", "render_serve",
    "render_summary", "render_validations", "report_text",
]  # fmt: skip


def format_bytes(nbytes: int) -> str:
    """Binary units, as nvidia-smi and torch.cuda.memory_summary print them."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def render_summary(report: Report, console: Console) -> None:
    """The choices simulated, the peak, the verdict and the advice: ``print(report)`` in Python."""
    opts = report.options
    console.print(
        Text.assemble(
            (f"{report.model}", "bold"),
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
            f"  parameters={report.parameters:,}",
        )
    )
    if report.settings:
        console.print("Simulated with: " + ", ".join(f"{name} {value}" for name, value in report.settings.items()))
    at = report.peak_at
    where = f"step {at.step}, {at.phase}, {at.op}" + (f" in {at.module}" if at.module else "")
    console.print(
        Text.assemble("Peak allocated (max_memory_allocated): ", (format_bytes(report.peak_bytes), "bold"), f"  at {where}")
    )
    console.print(
        f"Reserved by the allocator: {format_bytes(report.reserved_bytes)}   "
        f"{_device_label(report.target).capitalize()}: {format_bytes(report.device_bytes)}"
    )
    if report.fits is not None and report.capacity_bytes is not None:
        usable = report.capacity_bytes * (1 - report.headroom)
        verdict = "[bold green]FITS[/]" if report.fits else "[bold red]DOES NOT FIT[/]"
        console.print(
            f"{verdict} on {report.target}: {format_bytes(report.device_bytes)} of "
            f"{format_bytes(int(usable))} usable ({report.headroom:.0%} headroom)"
        )
        if report.allocator_pressure is not None:
            console.print(_pressure(report.allocator_pressure))
        for hint in report.advice:
            console.print(f"  try: {hint}")


def render_report(report: Report, console: Console, *, fold: bool = True) -> None:
    """What ``vramsim trace`` prints: the summary, the tables (alike layers folded unless ``fold`` is
    False), the assumptions."""
    render_summary(report, console)
    if report.components:
        console.print(_components(report))
    if report.ranks is not None:
        console.print(_ranks(report))
    if report.checkpointing:
        console.print(_checkpointing(report))
    console.print(Group(_breakdown(report), _layers(report, console, fold)))
    if report.assumptions:
        console.print("Assumptions:")
        for item in report.assumptions:
            console.print(f"  - {item.name}: {item.detail}")
    console.print(f"[dim]traced in {report.trace_seconds:.2f} s[/dim]")


def _device_label(target: str) -> str:
    """What shows ``device_bytes`` on the target: nvidia-smi, rocm-smi, or the process on the cpu."""
    from vramsim.estimators.devices import get_device

    vendor = get_device(target).vendor
    return {"cpu": "in host memory (the process)", "amd": "on the device (rocm-smi)"}.get(vendor, "on the device (nvidia-smi)")


def report_text(report: Report, *, summary: bool, fold: bool = True, width: int | None = None) -> str:
    """The terminal view as plain text (``str(report)``, ``report.render()``); ``width`` None: $COLUMNS, else 80."""
    text = io.StringIO()
    console = Console(file=text, width=width, color_system=None, highlight=False)
    if summary:
        render_summary(report, console)
    else:
        render_report(report, console, fold=fold)
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
    table = Table(title=f"Per rank: {ranks.scheme} over {ranks.gpus} GPUs ({alike})", title_justify="left")
    table.add_column("per rank")
    table.add_column("bytes", justify="right")
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
        table.add_row("most weight elements gathered at once", f"{ranks.gathered_elements:,}")
    for kind, nbytes in ranks.host.items():
        table.add_row(f"host memory (CPU offload, not on the device): {kind}", format_bytes(nbytes))
    table.add_row("peak allocated", format_bytes(report.peak_bytes))
    table.add_row(_device_label(report.target), format_bytes(report.device_bytes))
    for stage in ranks.stages:
        fits = "" if stage.fits is None else (", fits" if stage.fits else ", does not fit")
        table.add_row(
            f"stage {stage.rank}: {len(stage.layers)} layers, {format_bytes(stage.held_bytes)} held per "
            f"micro-batch x {stage.in_flight:g} in flight",
            f"{format_bytes(stage.device_bytes)}{fits}",
        )
    if report.fits is not None:
        table.add_row("fits", "yes" if report.fits else "no")
    return table


def _checkpointing(report: Report) -> Table:
    auto = report.options.get("checkpointing") == "auto"
    title = (
        "Activation checkpointing: auto's choice, per layer"
        if auto
        else "Activation checkpointing, each choice from this one trace"
    )
    table = Table(title=title, title_justify="left")
    for name in ("choice", "peak", "device", "fits", "recomputed", "TFLOP", "to host"):
        table.add_column(
            name, justify="left" if name == "choice" else "right", no_wrap=name != "choice", overflow="fold"
        )  # the choice gives way, folded whole
    for choice in report.checkpointing:
        fits = "-" if choice.fits is None else ("yes" if choice.fits else "no")
        cost = choice.cost
        table.add_row(
            choice.checkpointing,
            format_bytes(choice.peak_bytes),
            format_bytes(choice.device_bytes),
            fits,
            f"{cost.recomputed_ops:,}",
            f"{cost.recomputed_flops / 1e12:,.1f}",
            format_bytes(cost.offloaded_bytes),
        )
    return table


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
            _saved(*row.activation_bytes),
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
    for row, cell in zip(rows, cells, strict=True):
        table.add_row(_left_ellipsis(row.module.removeprefix(PEFT_PREFIX) if peft else row.module, room), *cell)
    return table


_MODULE_MIN_WIDTH = 12
"""Below this the module column wraps rather than lose its name to the ellipsis."""


def _left_ellipsis(name: str, width: int) -> str:
    """The end of a module path is what tells rows apart (``...layers.0-31 x32``): cut from the left."""
    return name if len(name) <= width else "…" + name[len(name) - width + 1 :]


def _saved(least: int, most: int) -> str:
    """One layer's saved bytes over a folded run; ``<=`` marks a run whose layers differ (layer 0's
    input is the embedding's output), with the most one of them saves."""
    most_text = format_bytes(most)
    return most_text if format_bytes(least) == most_text else f"\u2264{most_text}"


def render_devices(console: Console) -> None:
    """The catalog, one section per segment: what ``total_memory`` reports, the architecture the
    emulation follows, bf16/fp8 support, SM (or CU) count, and whether the memory is an estimate."""
    from vramsim.estimators.devices import DEVICES

    table = Table(title="Target devices (--device NAME)", title_justify="left")
    for name in ("name", "device", "total_memory", "arch", "bf16", "fp8", "SMs/CUs"):
        header = {"total_memory": "total\nmemory", "SMs/CUs": "SMs/\nCUs"}.get(name, name)  # narrow: 80 columns
        table.add_column(
            header, justify="right" if name in ("total_memory", "SMs/CUs") else "left", no_wrap=name != "device", overflow="fold"
        )
    groups = {"host": "host", "datacenter": "data centre", "workstation": "workstation", "consumer": "consumer"}
    group = ""
    for profile in DEVICES.values():
        heading = groups[profile.segment] + (", AMD" if profile.vendor == "amd" else "")
        if heading != group:
            if group:
                table.add_section()
            table.add_row(Text(heading, style="bold"))
            group = heading
        memory = format_bytes(profile.memory_bytes) if profile.memory_bytes else "host RAM"
        if profile.memory_source.startswith("estimate"):
            memory += " *"
        arch = profile.gfx_arch or (
            f"sm_{profile.compute_capability[0]}{profile.compute_capability[1]}"
            if profile.compute_capability
            else profile.architecture
        )
        table.add_row(
            profile.name,
            profile.label,
            memory,
            arch,
            "yes" if profile.supports_bf16 else "no",
            "yes" if profile.supports_fp8 else "no",
            str(profile.multiprocessors or "-"),
        )
    console.print(table)
    console.print(
        "* estimated from a sibling card's driver reservation (no reported figure found); sources: vramsim.estimators.devices"
    )


def render_validations(results: list[Validation], console: Console) -> None:
    table = Table(title="Predicted vs measured (steady-state peak)", title_justify="left")
    for name in ("model", "device", "predicted", "measured", "error"):
        table.add_column(name, justify="left" if name in ("model", "device") else "right")
    for result in results:
        table.add_row(
            result.model,
            result.device,
            format_bytes(result.predicted_bytes),
            format_bytes(result.measured_bytes),
            f"{result.error:+.3%}",
        )
    console.print(table)


def render_serve(report: ServeReport, console: Console) -> None:
    """The budget term by term, then the lines vLLM logs (``Available KV cache memory``,
    ``GPU KV cache size``, ``Maximum concurrency``), then the layers and the assumptions."""
    engine = "vLLM" if report.engine == "vllm" else "SGLang"
    share = "gpu_memory_utilization" if report.engine == "vllm" else "mem_fraction_static"
    pipeline = f", pipeline parallel {report.pp}" if report.pp > 1 else ""
    console.print(
        Text.assemble(
            (report.model, "bold"),
            f"  {engine} on {report.gpus} x {report.target}, tensor parallel "
            f"{report.tp}{pipeline}, max_model_len {report.max_model_len:,}, kv_cache_dtype "
            f"{report.kv_cache_dtype}  (per rank)",
        )
    )
    rows = [
        ("total_memory of the device", report.total_bytes, ""),
        (
            f"usable: total x {share} {report.utilization:.2f}",
            report.usable_bytes,
            "" if report.engine == "vllm" else "total less the CUDA context, times the fraction",
        ),
        ("- weights (this rank's shard)", report.weights_bytes, "every parameter, as the allocator holds it"),
        (
            f"- activation peak of a profile forward over {report.max_num_batched_tokens:,} tokens",
            report.activation_peak_bytes,
            f"logits kept for {report.max_num_seqs:,} sequences",
        ),
        ("- memory outside torch (NCCL, custom all-reduce)", report.non_torch_bytes, "tensor or pipeline parallel only"),
        ("- CUDA graph pool", report.cuda_graph_bytes, "0 with --enforce-eager"),
        ("= KV cache", report.kv_cache_bytes, ""),
    ]
    table = Table(title="Budget", title_justify="left")
    for name in ("term", "bytes", "why"):
        table.add_column(name, justify="right" if name == "bytes" else "left")
    for term, nbytes, why in rows:
        table.add_row(term, format_bytes(nbytes), why)
    console.print(table)
    if report.stages:
        console.print(_serve_stages(report))
    console.print(f"Available KV cache memory: {format_bytes(report.kv_cache_bytes)}")
    console.print(
        f"KV cache: {report.kv_cache_tokens:,} tokens, {report.kv_blocks:,} blocks "
        f"({report.block_size} tokens, {format_bytes(report.block_bytes)} each; "
        f"{format_bytes(report.kv_bytes_per_token)} per token)"
    )
    console.print(
        f"Maximum concurrency at {report.max_model_len:,} tokens per request: {report.max_concurrency:.2f}x "
        f"({format_bytes(report.request_bytes)} per request)"
    )
    if report.kv_blocks == 0:
        console.print(
            '[bold red]No memory is left for the KV cache[/]: vLLM stops at start-up ("No available memory '
            'for the cache blocks"); lower --max-num-batched-tokens, raise --tp or quantize the weights'
        )
    elif report.max_concurrency < 1:
        console.print(
            f"[bold red]One request of {report.max_model_len:,} tokens does not fit[/]: vLLM refuses to start "
            "(max seq len larger than the KV cache); lower --max-model-len or raise --tp"
        )
    if report.concurrency is not None:
        console.print(
            f"Answer: {report.gpus} x {report.target} (tensor parallel {report.tp}, {report.replicas} "
            f"replica{'s' if report.replicas > 1 else ''}) serve {report.concurrency:,} requests of "
            f"{report.max_model_len:,} tokens"
        )
    console.print(_serve_layers(report))
    console.print("Assumptions:")
    for item in report.assumptions:
        console.print(f"  - {item.name}: {item.detail}" + (f" ({format_bytes(item.bytes)})" if item.bytes else ""))
    console.print(f"[dim]traced in {report.trace_seconds:.2f} s[/dim]")


def _serve_stages(report: ServeReport) -> Table:
    """Each pipeline stage's own budget; every stage gets the fewest blocks (the budget above is that stage's)."""
    table = Table(title="Pipeline stages (each gets the fewest blocks any stage holds)", title_justify="left")
    for name in ("stage", "layers", "weights", "activation peak", "KV cache", "blocks"):
        table.add_column(name, justify="right")
    for stage in report.stages:
        first, last = stage.layers
        table.add_row(
            str(stage.rank),
            f"{first}-{last - 1}",
            format_bytes(stage.weights_bytes),
            format_bytes(stage.activation_peak_bytes),
            format_bytes(stage.kv_cache_bytes),
            f"{stage.kv_blocks:,}",
        )
    return table


def _serve_layers(report: ServeReport) -> Table:
    """Cache layers grouped by what they keep, as measured from the model's own cache."""
    groups: dict[tuple[str, int, int | None, int, str], int] = {}
    for layer in report.layers:
        key = (layer.kind, layer.model_bytes_per_token, layer.window, layer.state_bytes, layer.cache_class)
        groups[key] = groups.get(key, 0) + 1
    table = Table(title="KV cache layers (measured from the model's cache)", title_justify="left")
    for name in ("layers", "kind", "cache class", "per token (model cache)", "window", "state"):
        table.add_column(name, justify="left" if name in ("kind", "cache class") else "right")
    for (kind, per_token, window, state, cls), count in groups.items():
        table.add_row(
            str(count),
            kind,
            cls,
            format_bytes(per_token),
            "-" if window is None else f"{window:,}",
            format_bytes(state) if state else "-",
        )
    return table


def _largest_line(largest: Largest, held: str, *, advice: bool = False) -> str:
    """One searched option: its largest fitting value and the traced value after it."""
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


def _largest_lines(fit: LargestFit, *, advice: bool = False) -> list[str]:
    held = {"batch_size": f"--seq-len {fit.given['seq_len']:,}", "seq_len": f"--batch-size {fit.given['batch_size']:,}"}
    return [_largest_line(each, held[each.option], advice=advice) for each in (fit.batch_size, fit.seq_len) if each]


def fit_advice(fit: LargestFit) -> list[str]:
    """The largest batch size and sequence length as advice lines, saying they were traced."""
    return _largest_lines(fit, advice=True)


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


def _pressure(pressure: AllocatorPressure) -> str:
    """What the caching allocator does within the usable memory, where the unlimited replay reserves more."""
    within = f"within {format_bytes(pressure.limit_bytes)} for the allocator"
    if pressure.oom_at is not None:
        line = f"  out of memory at {pressure.oom_at} even after emptying the cache ({within})"
    else:
        line = (
            f"  fits under allocator pressure: the cache is emptied {pressure.retries} time(s) to retry a cudaMalloc "
            f"({within}); each is a device-wide synchronisation"
        )
    if pressure.expandable_retries is not None:
        line += (
            f"; --expandable-segments runs it with {pressure.expandable_retries} retries"
            if pressure.expandable_retries
            else "; --expandable-segments runs it without emptying the cache"
        )
    return line


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
