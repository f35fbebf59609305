"""A ServeComparison as the terminal shows it (``vramsim compare --serve``): a row per deployment, the figures a
serving user decides with (the KV cache, its tokens, the requests it holds at once, whether the engine starts,
the weights)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.compare import ServeCompared, ServeComparison
from vramsim.results.serving import ServeReport
from vramsim.views.lines import print_wrapped, wrap
from vramsim.views.units import format_bytes

__all__ = ["render_serve_comparison"]

_SHARED_ONLY = "(shared flags)"
"""The row of the variant with no flags of its own (``""``)."""

_SETTINGS = {
    "engine": lambda r: f"{'vLLM' if r.engine == 'vllm' else 'SGLang'} on {r.gpus} x {r.target}",
    "tensor parallel": lambda r: f"tensor parallel {r.tp}",
    "pipeline parallel": lambda r: f"pipeline parallel {r.pp}",
    "max_model_len": lambda r: f"max_model_len {r.max_model_len:,}",
    "kv_cache_dtype": lambda r: f"kv_cache_dtype {r.kv_cache_dtype}",
    "utilization": lambda r: f"utilization {r.utilization:.2f}",
}
"""The settings a deployment is told by: in the heading when every variant shares one, else a line of each's."""


def render_serve_comparison(comparison: ServeComparison, console: Console) -> None:
    """The model and what the variants share, a row per variant, the settings that differ, why an engine would
    not start, what each column counts, and the traces it took."""
    reports = [each.report for each in comparison.variants if each.report is not None]
    shared, differ = _settings(reports)
    print_wrapped(console, Text.assemble((comparison.model, "bold"), f"  {', '.join(shared)}" if shared else ""))
    headers = ("KV cache", "tokens", "requests", "starts", "weights")
    refused = [each for each in comparison.variants if each.refused is not None]
    cells = [_cells(each, refused) for each in comparison.variants]
    widths = [max(len(header), *(len(cell[i]) for cell in cells)) for i, header in enumerate(headers)]
    room = max(console.width - sum(widths) - 2 * len(headers), len("variant"))  # a gap of two before each column
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("variant", overflow="fold")
    for header in headers:
        table.add_column(header, justify="left" if header == "starts" else "right", no_wrap=True)
    for each, cell in zip(comparison.variants, cells, strict=True):
        label = "\n".join(line.plain for line in wrap(each.label or _SHARED_ONLY, room))
        table.add_row(label, *cell)
    console.print(table)
    for name in differ:
        values = ", ".join("-" if each.report is None else _SETTINGS[name](each.report) for each in comparison.variants)
        print_wrapped(console, f"{name}, row by row: {values.replace(name + ' ', '')}")
    for number, each in enumerate(refused, start=1):
        print_wrapped(console, f"({number}) {each.label or _SHARED_ONLY}: {each.refused}", indent=4)
    print_wrapped(
        console,
        "KV cache: the memory left for it, per rank; tokens: what it holds; requests: of max_model_len tokens, "
        "held at once (vLLM's maximum concurrency); starts: whether the engine starts (capped: SGLang starts but "
        "caps a request at the tokens less one); weights: one rank's",
    )
    count = len(comparison.variants)
    traces = f"{comparison.traces} trace{'s' if comparison.traces != 1 else ''}"
    console.print(f"[dim]{count} variants from {traces} in {comparison.trace_seconds:.1f} s[/dim]")


def _settings(reports: list[ServeReport]) -> tuple[list[str], list[str]]:
    """The settings every report shares, as the heading says them, and the names of those that differ."""
    shared, differ = [], []
    for name, told in _SETTINGS.items():
        values = {told(report) for report in reports}
        if len(values) > 1:
            differ.append(name)
        elif values and values != {"pipeline parallel 1"}:
            shared.append(values.pop())
    return shared, differ


def _cells(each: ServeCompared, refused: list[ServeCompared]) -> tuple[str, ...]:
    """One variant's KV cache, tokens, maximum concurrency, start and weights; a refused one's note number."""
    report = each.report
    if report is None:
        return ("-", "-", "-", f"no ({refused.index(each) + 1})", "-")
    starts = "yes" if report.max_concurrency >= 1 else "capped"  # vLLM refuses below one request (serving.kv_budget)
    return (
        format_bytes(report.kv_cache_bytes),
        f"{report.kv_cache_tokens:,}",
        f"{report.max_concurrency:.2f}x",
        starts,
        format_bytes(report.weights_bytes),
    )
