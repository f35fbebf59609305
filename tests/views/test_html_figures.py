"""The HTML pages' figures drawn from a timeline record: the peak marker, the device line, the overlay's labels."""

from __future__ import annotations

from dataclasses import replace

from vramsim.results.timeline import MemoryTimeline, PhaseSpan, TimelinePoint
from vramsim.views.html import overlaid_timelines
from vramsim.views.html.page import figure_section, page
from vramsim.views.html.timeline import PEAK_TRACE, counters_figure, stacked_figure

GIB = 2**30


def timeline(peak: int) -> MemoryTimeline:
    """Three events of a step: a weight's read, an activation up to ``peak``, its free in backward."""

    def point(event: int, activations: int, phase: str, allocates: bool) -> TimelinePoint:
        return TimelinePoint(
            event=event,
            allocated_bytes=GIB + activations,
            reserved_bytes=2 * GIB + activations,
            categories={"parameters": GIB} | ({"activations": activations} if activations else {}),
            allocates=allocates,
            nbytes=activations or 512,
            op="aten.mm",
            module="model.layers.0.mlp",
            phase=phase,
            step=1,
            shape=(4, 128),
            dtype="torch.bfloat16",
        )

    return MemoryTimeline(
        first_event=10,
        last_event=12,
        points=[point(10, 0, "forward", True), point(11, peak - GIB, "forward", True), point(12, 0, "backward", False)],
        peak_event=11,
        reserved_peak_event=11,
        phases=[
            PhaseSpan(phase="forward", first_event=10, last_event=11),
            PhaseSpan(phase="backward", first_event=12, last_event=12),
        ],
        reserved_overhead_bytes=100,
        device_overhead_bytes=500 * 2**20,
        usable_bytes=70 * GIB,
        capacity_bytes=80 * GIB,
    )


def test_the_peak_marker_holds_the_exact_bytes() -> None:
    figure = stacked_figure(timeline(3 * GIB + 7))
    (marker,) = [trace for trace in figure.data if trace.name == PEAK_TRACE]
    assert list(marker.customdata) == [3 * GIB + 7] and list(marker.x) == [11]
    assert [trace.name for trace in figure.data if trace.stackgroup] == ["parameters", "activations"]
    (line,) = [trace for trace in figure.data if trace.name == "allocated"]
    assert "backward: aten.mm in model.layers.0.mlp<br>frees 512 B: [4, 128] torch.bfloat16" in line.text[2]
    assert [shape.x0 for shape in figure.layout.shapes] == [9.5, 11.5]


def test_the_device_line_adds_both_overheads() -> None:
    figure = counters_figure(timeline(3 * GIB), "h100")
    device = next(trace for trace in figure.data if trace.name.startswith("on the device"))
    assert device.y[1] * GIB == 2 * GIB + 2 * GIB + 100 + 500 * 2**20
    assert any(shape.y0 == 70 and shape.y1 == 70 for shape in figure.layout.shapes)  # the usable line


def test_overlay_labels_each_timeline_from_its_first_event() -> None:
    figure = overlaid_timelines([("LoRA", timeline(2 * GIB)), ("full", timeline(5 * GIB))])
    assert [trace.name for trace in figure.data] == ["LoRA", f"LoRA: {PEAK_TRACE}", "full", f"full: {PEAK_TRACE}"]
    assert list(figure.data[0].x) == [0, 1, 2]
    assert [list(figure.data[i].customdata) for i in (1, 3)] == [[2 * GIB], [5 * GIB]]


def test_a_page_inlines_plotly_once() -> None:
    figure = overlaid_timelines([("a", timeline(2 * GIB))])
    text = page("t", "h", [figure_section("one", figure), figure_section("two", stacked_figure(timeline(2 * GIB)))])
    assert text.count("plotly.js v") == 1 and text.count('class="plotly-graph-div"') == 2
    assert "prefers-color-scheme: dark" in text


def test_a_narrow_phase_is_shaded_but_not_named() -> None:
    """A span too narrow for its name (a layer's recompute in backward) gets no label, not plotly's placeholder."""
    wide = timeline(2 * GIB)
    assert [a.text for a in stacked_figure(wide).layout.annotations] == ["forward", "backward"]
    narrow = replace(wide, last_event=1000, phases=[PhaseSpan(phase="recompute", first_event=10, last_event=12)])
    figure = stacked_figure(narrow)
    assert len(figure.layout.shapes) == 1 and figure.layout.annotations == ()
