"""``vramsim compare --html``: the variants' timelines overlaid, then the terminal's table."""

from __future__ import annotations

from vramsim.results.compare import Comparison
from vramsim.views.compare import render_comparison
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.terminal import terminal_html
from vramsim.views.html.timeline import overlaid_timelines

__all__ = ["compare_html"]


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
