"""A Report as one HTML page (``vramsim trace --html``): the terminal's summary, the memory timeline, the
counters against the usable memory, the breakdown at the peak, the per-part views, the per-layer table."""

from __future__ import annotations

import html

from vramsim.results.report import Report
from vramsim.views.folding import fold_layers
from vramsim.views.html.bars import Bar, bars_figure
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.tables import breakdown_table, layers_table
from vramsim.views.html.terminal import terminal_html
from vramsim.views.html.timeline import counters_figure, stacked_figure
from vramsim.views.report import render_report, render_summary

__all__ = ["report_html"]

_BEYOND = "more on the device (cache, context)"


def report_html(report: Report) -> str:
    """The report as one self-contained HTML page, what ``vramsim trace --html PATH`` writes: the summary, the
    memory timeline of the steady-state step (``report.timeline``) by category with the phases and the peak,
    allocated, reserved and the device against the usable memory, the breakdown at the peak, the per-part
    views and the per-layer table. It opens with no network: ``Path("r.html").write_text(report_html(report))``."""
    sections = [Section("Summary", terminal_html(lambda console: render_summary(report, console)))]
    if report.warnings:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in report.warnings)
        sections.append(Section("Warnings", f"<ul>{items}</ul>"))
    if report.timeline is not None:
        sections.append(
            figure_section(
                "Memory over the steady-state step",
                stacked_figure(report.timeline),
                "Allocated bytes by category after each event, phases shaded, the peak marked; hover for the op, "
                "module, phase and tensor. Alike events are sampled; every peak is kept.",
            )
        )
        sections.append(
            figure_section(
                "Allocated, reserved and the device against the usable memory",
                counters_figure(report.timeline, report.target),
            )
        )
    sections.append(Section("At the peak (the same moment, counted as the peak is)", breakdown_table(report)))
    sections.extend(_part_sections(report))
    folded = "; xN: N alike layers, figures per layer" if any(row.count > 1 for row in fold_layers(report.layers)) else ""
    sections.append(Section(f"Per layer (steady-state step{folded})", layers_table(report)))
    sections.append(
        Section(
            "As the terminal prints it",
            f"<details><summary>vramsim trace</summary>{terminal_html(lambda c: render_report(report, c))}</details>",
        )
    )
    return page(f"vramsim: {report.model}", f"{report.model} on {report.target}", sections)


def _part_sections(report: Report) -> list[Section]:
    """A pipeline's components, a pipeline-parallel run's stages, a device map's GPUs: each part's figures."""
    usable = report.timeline.usable_bytes if report.timeline is not None else None
    sections = []
    if report.components:
        bars: list[Bar] = [(f"{c.name} ({c.phase})", {"peak while running": c.peak_bytes}) for c in report.components]
        sections.append(figure_section("Pipeline components", bars_figure(bars, usable_bytes=usable)))
    ranks = report.ranks
    if ranks is not None and ranks.stages:
        bars = [
            (f"stage {s.rank}", {"peak allocated": s.peak_bytes, _BEYOND: s.device_bytes - s.peak_bytes}) for s in ranks.stages
        ]
        sections.append(figure_section("Per stage", bars_figure(bars, usable_bytes=usable, top=_BEYOND)))
    if ranks is not None and ranks.devices:
        bars = [
            (f"GPU {d.device}", {"peak allocated": d.peak_bytes, _BEYOND: d.device_bytes - d.peak_bytes}) for d in ranks.devices
        ]
        sections.append(figure_section("Per GPU", bars_figure(bars, usable_bytes=usable, top=_BEYOND)))
    if ranks is not None:
        state = dict(ranks.model_state)
        for name, nbytes in ranks.buffers.items():  # DDP's buckets in one part, as the terminal counts them
            part = "communication: DDP buckets" if name.startswith("DDP bucket ") else f"communication: {name}"
            state[part] = state.get(part, 0) + nbytes
        sections.append(figure_section(f"Per rank: {ranks.scheme} over {ranks.gpus} GPUs", bars_figure([("one rank", state)])))
    return sections
