"""A ServeReport (``vramsim serve``) as the terminal shows it: the budget, the lines vLLM logs, the cache layers."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.serving import ServeReport
from vramsim.views.lines import print_wrapped
from vramsim.views.units import format_bytes

__all__ = ["render_serve"]


def render_serve(report: ServeReport, console: Console) -> None:
    """The budget term by term, then the lines vLLM logs (``Available KV cache memory``,
    ``GPU KV cache size``, ``Maximum concurrency``), then the layers and the assumptions."""
    engine = f"vLLM {report.vllm_version}" if report.engine == "vllm" else "SGLang"
    pipeline = f", pipeline parallel {report.pp}" if report.pp > 1 else ""
    _say(
        console,
        Text.assemble(
            (report.model, "bold"),
            f"  {engine} on {report.gpus} x {report.target}, tensor parallel "
            f"{report.tp}{pipeline}, max_model_len {report.max_model_len:,}, kv_cache_dtype "
            f"{report.kv_cache_dtype}{_served_with(report)}  (per rank)",
        ),
    )
    _say(console, "Budget")
    console.print(_budget(report))
    if report.stages:
        _say(console, "Pipeline stages (each gets the fewest blocks any stage holds)")
        console.print(_serve_stages(report))
    _say(console, f"Available KV cache memory: {format_bytes(report.kv_cache_bytes)}")
    _say(
        console,
        f"KV cache: {report.kv_cache_tokens:,} tokens, {report.kv_blocks:,} blocks "
        f"({report.block_size} tokens, {format_bytes(report.block_bytes)} each; "
        f"{format_bytes(report.kv_bytes_per_token)} per token)",
    )
    _say(
        console,
        f"Maximum concurrency at {report.max_model_len:,} tokens per request: {report.max_concurrency:.2f}x "
        f"({format_bytes(report.request_bytes)} per request)",
    )
    if report.shared_prefix is not None:
        prefix = report.shared_prefix
        _say(
            console,
            f"With a shared prefix of {prefix.tokens:,} tokens (prefix caching): {prefix.max_concurrency:.2f}x "
            f"({prefix.shared_blocks:,} blocks held once, {prefix.request_blocks:,} of each request's own)",
        )
    if report.max_concurrency < 1:  # vLLM refuses to start (serving.kv_budget); SGLang shortens requests
        _say(
            console,
            f"[bold red]One request of {report.max_model_len:,} tokens does not fit[/]: SGLang starts but "
            f"caps a request at {report.kv_cache_tokens - 1:,} tokens (max_req_len: the token pool less one); "
            "lower --max-model-len or raise --tp",
        )
    if report.concurrency is not None:
        _say(
            console,
            f"Answer: {report.gpus} x {report.target} (tensor parallel {report.tp}, {report.replicas} "
            f"replica{'s' if report.replicas > 1 else ''}) serve {report.concurrency:,} requests of "
            f"{report.max_model_len:,} tokens",
        )
    if report.encoder is not None:
        encoder = report.encoder
        _say(
            console,
            f"Encoder profile: {encoder.items:,} x {encoder.modality} {encoder.width} x {encoder.height} "
            f"({_crops(encoder.crops_per_item)}{encoder.tokens_per_item:,} tokens each): "
            f"peak {format_bytes(encoder.peak_bytes)} alone; its outputs, "
            f"{format_bytes(encoder.cache_bytes)}, kept through the decoder's run (in the activation peak)",
        )
    _say(console, "KV cache layers (measured from the model's cache)")
    console.print(_serve_layers(report))
    _say(console, "Assumptions:")
    for item in report.assumptions:
        _say(console, f"  - {item.name}: {item.detail}" + (f" ({format_bytes(item.bytes)})" if item.bytes else ""), "    ")
    _say(console, f"[dim]traced in {report.trace_seconds:.2f} s[/dim]")


def _crops(crops: int) -> str:
    """Pan-and-scan's inputs per image, when there are more than the image itself."""
    return f"{crops - 1} crops and the whole image, " if crops > 1 else ""


def _say(console: Console, line: str | Text, indent: str = "") -> None:
    """``line`` (markup is read) wrapped as ``print_wrapped`` wraps, continued after ``indent``."""
    print_wrapped(console, Text.from_markup(line) if isinstance(line, str) else line, indent=len(indent))


def _served_with(report: ServeReport) -> str:
    """The header's words for LoRA slots, a speculative proposer, prefix caching and a shared prefix."""
    parts = []
    if report.lora is not None:
        parts.append(f"LoRA {report.lora.max_loras} x rank {report.lora.max_lora_rank}")
    spec = report.speculative
    if spec is not None:
        parts.append(f"speculative {spec.model or spec.method} ({spec.num_speculative_tokens} tokens)")
    if not report.prefix_caching:
        parts.append("no prefix caching")
    if report.shared_prefix is not None:
        parts.append(f"shared prefix {report.shared_prefix.tokens:,}")
    return "".join(f", {part}" for part in parts)


def _budget(report: ServeReport) -> Table:
    """The device's memory less each term the engine takes before the cache: what is left is the KV cache."""
    share = "gpu_memory_utilization" if report.engine == "vllm" else "mem_fraction_static"
    rows = [
        ("total_memory of the device", report.total_bytes, ""),
        (
            f"usable: total x {share} {report.utilization:.2f}",
            report.usable_bytes,
            "" if report.engine == "vllm" else "total less the CUDA context, times the fraction",
        ),
        ("- weights (this rank's shard)", _base_weights(report), "every parameter, as the allocator holds it"),
        *_adapter_rows(report),
        (
            f"- activation peak of a profile forward over {report.max_num_batched_tokens:,} tokens",
            report.activation_peak_bytes,
            f"logits kept for {report.max_num_seqs:,} sequences",
        ),
        ("- memory outside torch (NCCL, custom all-reduce)", report.non_torch_bytes, "tensor or pipeline parallel only"),
        ("- CUDA graph pool", report.cuda_graph_bytes, "0 with --enforce-eager"),
        ("= KV cache", report.kv_cache_bytes, ""),
    ]
    table = Table()
    for name in ("term", "bytes", "why"):
        table.add_column(name, justify="right" if name == "bytes" else "left")
    for term, nbytes, why in rows:
        table.add_row(term, format_bytes(nbytes), why)
    return table


def _base_weights(report: ServeReport) -> int:
    """The model's own weights: the weights' term less the LoRA slots and the draft's weights in it."""
    lora = report.lora.slot_bytes if report.lora else 0
    draft = report.speculative.weights_bytes if report.speculative else 0
    return report.weights_bytes - lora - draft


def _adapter_rows(report: ServeReport) -> list[tuple[str, int, str]]:
    """The LoRA slots' and the draft model's rows, loaded with the weights."""
    rows = []
    if report.lora is not None:
        lora = report.lora
        rows.append((f"- LoRA slots: {lora.max_loras} x rank {lora.max_lora_rank}", lora.slot_bytes, "at start-up, zeroed"))
    spec = report.speculative
    if spec is not None and spec.model is not None:
        rows.append(("- draft model's weights", spec.weights_bytes, spec.model))
    return rows


def _serve_stages(report: ServeReport) -> Table:
    """Each pipeline stage's own budget; every stage gets the fewest blocks (the budget above is that stage's)."""
    table = Table()
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
    table = Table()
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
