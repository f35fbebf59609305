"""Bar figures of per-part figures against the usable memory: a pipeline's components, the stages of a pipeline
parallel run, the GPUs of a device map, a serving budget, the sizes a search traced."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from vramsim.views.units import format_bytes

__all__ = ["Bar", "bars_figure"]

_GIB = 2**30

Bar = tuple[str, dict[str, int]]
"""One bar: its label and its bytes by part (stacked in that order)."""


def bars_figure(
    bars: Sequence[Bar],
    *,
    usable_bytes: int | None = None,
    usable_label: str = "usable",
    stacked: bool = True,
    top: str | None = None,
) -> go.Figure:
    """Bars in GiB, each part's exact bytes on hover, stacked in the order the parts first appear (``top``
    last, on every bar) or side by side; a dashed line at ``usable_bytes``."""
    labels = [label for label, _ in bars]
    parts: dict[str, None] = {}
    for _, held in bars:
        parts.update(dict.fromkeys(held))
    if top is not None and top in parts:
        parts[top] = parts.pop(top)
    figure = go.Figure()
    for part in parts:
        values = [each.get(part, 0) for _, each in bars]
        figure.add_trace(
            go.Bar(
                x=labels,
                y=[v / _GIB for v in values],
                name=part,
                text=[format_bytes(v) if v else "" for v in values],
                hovertemplate="%{x}: %{text}<extra>%{fullData.name}</extra>",
            )
        )
    if usable_bytes is not None:
        figure.add_hline(
            y=usable_bytes / _GIB,
            line={"dash": "dash", "color": "rgb(214, 39, 40)"},
            annotation_text=f"{usable_label}: {format_bytes(usable_bytes)}",
            annotation_position="top left",
        )
    figure.update_layout(
        barmode="stack" if stacked else "group", yaxis_title="GiB", legend={"orientation": "h", "y": -0.2}, uniformtext_minsize=9
    )
    return figure
