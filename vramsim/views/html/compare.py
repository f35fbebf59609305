"""``vramsim compare --html``: the variants' timelines overlaid, then the terminal's table; with ``--serve``, the
variants' serving budgets side by side, then its table."""

from __future__ import annotations

from vramsim.results.compare import Comparison, ServeComparison
from vramsim.views.compare import render_comparison
from vramsim.views.compare_serving import render_serve_comparison
from vramsim.views.html.bars import Bar, bars_figure
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.serving import budget_terms
from vramsim.views.html.terminal import terminal_html
from vramsim.views.html.timeline import overlaid_timelines

__all__ = ["compare_html", "compare_serve_html"]


def compare_html(comparison: Comparison) -> str:
    """The whole page: each variant's allocated bytes over its steady-state step on one plot (each peak marked),
    then the table ``vramsim compare`` prints."""
    timelines = [(each.label or "(shared flags)", each.report.timeline) for each in comparison.variants]
    drawn = [(label, timeline) for label, timeline in timelines if timeline is not None]
    sections = []
    if drawn:
        sections.append(
            figure_section(
                "Allocated over the steady-state step, each variant",
                overlaid_timelines(drawn),
                "One line per variant, its peak marked; the event axis is each variant's own step.",
            )
        )
    sections.append(Section("Side by side", terminal_html(lambda console: render_comparison(comparison, console))))
    return page(f"vramsim compare: {comparison.model}", f"Variants of {comparison.model}", sections)


def compare_serve_html(comparison: ServeComparison) -> str:
    """The whole page: each variant's budget as a bar (the weights, the profile run's activation peak, memory outside
    torch, the CUDA graph pool, and the KV cache left), side by side, then the table ``vramsim compare --serve``
    prints."""
    reports = [(each.label or "(shared flags)", each.report) for each in comparison.variants if each.report is not None]
    bars: list[Bar] = [
        (
            f"{label}<br>{r.kv_cache_tokens:,} tokens, {r.max_concurrency:.2f}x",
            budget_terms(r.weights_bytes, r.activation_peak_bytes, r),
        )
        for label, r in reports
    ]
    usable = {r.usable_bytes for _, r in reports}
    refused = [each.label or "(shared flags)" for each in comparison.variants if each.report is None]
    caption = (
        "Each bar is one rank's usable memory: what the engine takes before the cache, and the KV cache left (under "
        "each, the tokens it holds and the requests of max_model_len at once)"
    )
    caption += "." if len(usable) == 1 else "; the usable memory differs between the variants, so each bar's height is its own."
    if refused:
        caption += f" No bar: {', '.join(refused)}, which the engine would not start with (the table says why)."
    sections = []
    if bars:
        shared = usable.pop() if len(usable) == 1 else None
        sections.append(figure_section("Budgets side by side", bars_figure(bars, usable_bytes=shared), caption))
    sections.append(Section("Side by side", terminal_html(lambda console: render_serve_comparison(comparison, console))))
    return page(f"vramsim compare --serve: {comparison.model}", f"Serving {comparison.model}, variant by variant", sections)
