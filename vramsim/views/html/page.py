"""The page around the sections: one HTML file, plotly's script inlined once, light and dark by the reader's setting."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

__all__ = ["Section", "figure_section", "page"]


@dataclass(frozen=True, slots=True)
class Section:
    """One part of a page: a heading and its HTML (a figure, a table, a terminal view)."""

    title: str
    body: str
    """HTML, already escaped where it holds text."""
    figure: go.Figure | None = None
    """A plotly figure drawn below ``body``; the page inlines plotly's script before the first one."""


def figure_section(title: str, figure: go.Figure, note: str = "") -> Section:
    """A section that is a figure, with a line of text above it."""
    return Section(title, f"<p>{html.escape(note)}</p>" if note else "", figure)


_STYLE = """
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --panel: #f6f8fa; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #30363d; --panel: #161b22; }
}
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
       margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 1280px; }
h1 { font-size: 1.35rem; margin: .5rem 0; } h2 { font-size: 1.1rem; margin: 2rem 0 .5rem; }
p, summary { color: var(--muted); }
pre.terminal { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .75rem;
               overflow-x: auto; font: 13px/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; color: var(--fg); }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .6rem; vertical-align: top; }
th { text-align: left; font-weight: 600; } td.n { text-align: right; white-space: nowrap; }
details > summary { cursor: pointer; color: var(--fg); }
details table { margin: .25rem 0 .5rem 1rem; font-size: 13px; }
.plot { width: 100%; min-height: 420px; }
"""

_DARK_PLOTS = """
(() => {
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  function paint() {
    const fg = dark.matches ? "#e6edf3" : "#1b1f24", grid = dark.matches ? "#30363d" : "#d0d7de";
    document.querySelectorAll(".plotly-graph-div").forEach((div) => Plotly.relayout(div, {
      "font.color": fg, "xaxis.gridcolor": grid, "yaxis.gridcolor": grid,
      "xaxis.linecolor": grid, "yaxis.linecolor": grid, "legend.font.color": fg }));
  }
  window.addEventListener("load", paint);
  dark.addEventListener("change", paint);
})();
"""


def page(title: str, heading: str, sections: Sequence[Section]) -> str:
    """The whole file: plotly.js once (before the first figure), each section in order."""
    parts = []
    inlined = False
    for section in sections:
        parts.append(f"<section><h2>{html.escape(section.title)}</h2>{section.body}")
        if section.figure is not None:
            parts.append(_figure_html(section.figure, include_plotlyjs=not inlined))
            inlined = True
        parts.append("</section>")
    script = f"<script>{_DARK_PLOTS}</script>" if inlined else ""
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(heading)}</h1>{''.join(parts)}{script}</body></html>\n"
    )


def _figure_html(figure: go.Figure, *, include_plotlyjs: bool) -> str:
    """A figure's div: transparent so the page's colours show through, resized with the window, no logo link."""
    figure.update_layout(paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)", margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return figure.to_html(
        full_html=False,
        include_plotlyjs=include_plotlyjs,
        default_height="460px",
        config={"responsive": True, "displaylogo": False, "modeBarButtonsToRemove": ["sendDataToCloud"]},
    )
