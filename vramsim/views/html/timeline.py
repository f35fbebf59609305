"""The memory timeline as plotly figures: stacked by category, the device's three counters against its
usable memory, and several reports' timelines overlaid."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from vramsim.estimators.liveness import OVERHEAD_CATEGORY
from vramsim.results.timeline import MemoryTimeline, TimelinePoint
from vramsim.tracer.categories import Category
from vramsim.views.folding import without_peft_prefix
from vramsim.views.units import format_bytes

__all__ = ["PEAK_TRACE", "counters_figure", "overlaid_timelines", "stacked_figure"]

PEAK_TRACE = "peak allocated"
"""Name of the marker trace at the peak; its ``customdata`` is the peak's exact bytes."""

_GIB = 2**30

_PHASE_COLOURS = {
    "forward": "rgba(66, 133, 244, 0.10)",
    "backward": "rgba(234, 67, 53, 0.10)",
    "recompute": "rgba(251, 188, 5, 0.16)",
    "optimizer": "rgba(52, 168, 83, 0.12)",
    "encode_prompt": "rgba(66, 133, 244, 0.10)",
    "denoise": "rgba(171, 71, 188, 0.10)",
    "decode": "rgba(52, 168, 83, 0.12)",
}
_OTHER_PHASE = "rgba(128, 128, 128, 0.08)"
_NAMED_SPAN = 0.03
"""Share of the step a phase span must cover for its name to be written on it (narrower ones would overlap)."""


def stacked_figure(timeline: MemoryTimeline) -> go.Figure:
    """Allocated bytes stacked by category over the step, the phases shaded, the peak marked; hovering
    tells the event's op, module, phase and the tensor's shape and dtype."""
    points = timeline.points
    x = [p.event for p in points]
    figure = go.Figure()
    for category in _categories(points):
        figure.add_trace(
            go.Scatter(
                x=x,
                y=[p.categories.get(category, 0) / _GIB for p in points],
                name=category,
                stackgroup="allocated",
                mode="lines",
                line={"width": 0.5},
                hoverinfo="skip",
            )
        )
    figure.add_trace(
        go.Scatter(
            x=x,
            y=[p.allocated_bytes / _GIB for p in points],
            name="allocated",
            mode="lines",
            line={"width": 1, "color": "rgba(128,128,128,0.9)"},
            text=[_hover(p) for p in points],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    _mark_peak(figure, timeline)
    _shade_phases(figure, timeline)
    figure.update_layout(
        hovermode="closest", legend={"orientation": "h", "y": -0.18, "traceorder": "reversed"}, yaxis_title="GiB"
    )
    figure.update_xaxes(title="event (allocation or free) of the steady-state step")
    return figure


def counters_figure(timeline: MemoryTimeline, target: str) -> go.Figure:
    """Allocated, reserved and what the device shows over the step, against the usable memory (the headroom
    above it shaded up to the capacity)."""
    points = timeline.points
    x = [p.event for p in points]
    outside = timeline.reserved_overhead_bytes + timeline.device_overhead_bytes
    series = {
        "allocated (memory_allocated)": [p.allocated_bytes for p in points],
        "reserved by the allocator (memory_reserved)": [p.reserved_bytes + timeline.reserved_overhead_bytes for p in points],
        f"on the device ({'the process' if timeline.capacity_bytes is None else 'nvidia-smi'})": [
            p.reserved_bytes + outside for p in points
        ],
    }
    figure = go.Figure()
    for name, values in series.items():
        figure.add_trace(
            go.Scatter(
                x=x,
                y=[v / _GIB for v in values],
                name=name,
                mode="lines",
                text=[format_bytes(v) for v in values],
                hovertemplate="%{text}<extra>%{fullData.name}</extra>",
            )
        )
    if timeline.usable_bytes is not None and timeline.capacity_bytes is not None:
        usable, capacity = timeline.usable_bytes / _GIB, timeline.capacity_bytes / _GIB
        figure.add_hline(
            y=usable,
            line={"dash": "dash", "color": "rgb(214, 39, 40)"},
            annotation_text=f"usable on {target}: {format_bytes(timeline.usable_bytes)}",
            annotation_position="top left",
        )
        figure.add_hrect(y0=usable, y1=capacity, fillcolor="rgba(214, 39, 40, 0.08)", line_width=0)
        figure.add_annotation(
            x=0.5,
            xref="paper",
            y=capacity,
            yanchor="top",
            showarrow=False,
            text=f"headroom up to {format_bytes(timeline.capacity_bytes)}",
        )
    _shade_phases(figure, timeline)
    figure.update_layout(hovermode="x unified", legend={"orientation": "h", "y": -0.18}, yaxis_title="GiB")
    figure.update_xaxes(title="event (allocation or free) of the steady-state step")
    return figure


def overlaid_timelines(timelines: Sequence[tuple[str, MemoryTimeline]]) -> go.Figure:
    """Several reports' allocated bytes over their steps, each labelled, on one axis from the step's first
    event (``vramsim compare --html``); each peak is marked."""
    figure = go.Figure()
    for label, timeline in timelines:
        points = timeline.points
        figure.add_trace(
            go.Scatter(
                x=[p.event - timeline.first_event for p in points],
                y=[p.allocated_bytes / _GIB for p in points],
                name=label,
                mode="lines",
                text=[f"{label}<br>{_hover(p)}" for p in points],
                hovertemplate="%{text}<extra></extra>",
            )
        )
        peak = _peak_point(timeline)
        figure.add_trace(
            go.Scatter(
                x=[peak.event - timeline.first_event],
                y=[peak.allocated_bytes / _GIB],
                name=f"{label}: {PEAK_TRACE}",
                mode="markers",
                marker={"symbol": "diamond", "size": 10},
                customdata=[peak.allocated_bytes],
                hovertemplate=f"{label}: peak {format_bytes(peak.allocated_bytes)}<extra></extra>",
                showlegend=False,
            )
        )
    figure.update_layout(hovermode="closest", legend={"orientation": "h", "y": -0.18}, yaxis_title="GiB")
    figure.update_xaxes(title="event from the steady-state step's first")
    return figure


def _categories(points: list[TimelinePoint]) -> list[str]:
    """Every category that holds bytes at some point, in the order the breakdown lists them (bottom up)."""
    seen = {name for point in points for name in point.categories}
    order = [str(c) for c in Category] + [OVERHEAD_CATEGORY]
    return [name for name in order if name in seen] + sorted(seen - set(order))


def _hover(point: TimelinePoint) -> str:
    """What one event was: the op, module, phase, the block and its tensor, and the counters after it."""
    module = without_peft_prefix(point.module) or "(outside the model)"
    tensor = f"{list(point.shape)} {point.dtype}" if point.shape is not None else "(no traced tensor)"
    verb = "allocates" if point.allocates else "frees"
    return (
        f"<b>{format_bytes(point.allocated_bytes)}</b> allocated, {format_bytes(point.reserved_bytes)} reserved"
        f"<br>{point.phase}: {point.op} in {module}<br>{verb} {format_bytes(point.nbytes)}: {tensor}"
    )


def _peak_point(timeline: MemoryTimeline) -> TimelinePoint:
    return next(p for p in timeline.points if p.event == timeline.peak_event)


def _mark_peak(figure: go.Figure, timeline: MemoryTimeline) -> None:
    """A marker at the peak, its exact bytes in ``customdata``."""
    peak = _peak_point(timeline)
    figure.add_trace(
        go.Scatter(
            x=[peak.event],
            y=[peak.allocated_bytes / _GIB],
            name=PEAK_TRACE,
            mode="markers+text",
            marker={"symbol": "diamond", "size": 12, "color": "rgb(214, 39, 40)"},
            text=[f"peak {format_bytes(peak.allocated_bytes)}"],
            textposition="middle left",
            customdata=[peak.allocated_bytes],
            hovertemplate=f"peak allocated: {format_bytes(peak.allocated_bytes)}<br>{_hover(peak)}<extra></extra>",
        )
    )


def _shade_phases(figure: go.Figure, timeline: MemoryTimeline) -> None:
    """Each phase span shaded; named at the top where it is wide enough to hold its name."""
    events = max(timeline.last_event - timeline.first_event + 1, 1)
    for span in timeline.phases:
        named = (span.last_event - span.first_event + 1) / events >= _NAMED_SPAN
        name = {"annotation_text": span.phase, "annotation_position": "top left", "annotation_font_size": 11} if named else {}
        figure.add_vrect(
            x0=span.first_event - 0.5,
            x1=span.last_event + 0.5,
            fillcolor=_PHASE_COLOURS.get(span.phase, _OTHER_PHASE),
            line_width=0,
            layer="below",
            **name,
        )
