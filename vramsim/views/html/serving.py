"""A ServeReport as one HTML page (``vramsim serve --html``): the budget as a bar against the usable memory,
each pipeline stage's, then the terminal's view word for word."""

from __future__ import annotations

from vramsim.results.serving import ServeReport
from vramsim.views.html.bars import Bar, bars_figure
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.terminal import terminal_html
from vramsim.views.serving import render_serve

__all__ = ["budget_terms", "serve_html"]


def serve_html(report: ServeReport) -> str:
    """The whole page: what takes the usable memory (weights, the profile run's activation peak, memory outside
    torch, the CUDA graph pool) and the KV cache that is left, per rank and per stage."""
    bars: list[Bar] = [("one rank", budget_terms(report.weights_bytes, report.activation_peak_bytes, report))]
    bars += [
        (f"stage {s.rank}", budget_terms(s.weights_bytes, s.activation_peak_bytes, report) | {"KV cache": s.kv_cache_bytes})
        for s in report.stages
    ]
    engine = "vLLM" if report.engine == "vllm" else "SGLang"
    sections = [
        figure_section(
            "Budget",
            bars_figure(bars, usable_bytes=report.usable_bytes, usable_label="usable"),
            f"{engine}: the usable memory less each term the engine takes before the cache is the KV cache "
            f"({report.kv_cache_tokens:,} tokens, {report.max_concurrency:.2f}x requests of {report.max_model_len:,}).",
        ),
        Section("As the terminal prints it", terminal_html(lambda console: render_serve(report, console))),
    ]
    return page(f"vramsim serve: {report.model}", f"{report.model} served on {report.target}", sections)


def budget_terms(weights: int, activation: int, report: ServeReport) -> dict[str, int]:
    """The budget's terms, named as the terminal's budget table names them."""
    return {
        "weights (this rank's shard)": weights,
        "activation peak of a profile forward": activation,
        "memory outside torch (NCCL, custom all-reduce)": report.non_torch_bytes,
        "CUDA graph pool": report.cuda_graph_bytes,
        "KV cache": report.kv_cache_bytes,
    }
