"""A CheckpointReport as one HTML page (``vramsim checkpoint --html``): the save, the restore and the step after
it against the usable memory, the restore's peak by category, the files, then the terminal's view."""

from __future__ import annotations

from vramsim.results.checkpoint import CheckpointReport
from vramsim.views.checkpoint import render_checkpoint
from vramsim.views.html.bars import Bar, bars_figure
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.terminal import terminal_html
from vramsim.views.html.timeline import stacked_figure

__all__ = ["checkpoint_html"]

_BEYOND = "more on the device (cache, context)"


def checkpoint_html(report: CheckpointReport) -> str:
    """The whole page of one checkpoint report."""
    usable = None if report.capacity_bytes is None else int(report.capacity_bytes * (1 - report.headroom))
    moments: list[Bar] = [
        ("save", {"allocated": report.save_peak_bytes, _BEYOND: report.save_device_bytes - report.save_peak_bytes}),
        (
            "restore",
            {**report.restore_breakdown, _BEYOND: report.restore_device_bytes - report.restore_peak_bytes},
        ),
        ("next training step", {"on the device": report.train_device_bytes}),
    ]
    host: list[Bar] = [("save", {"host": report.save_host_bytes}), ("restore", {"host": report.restore_host_bytes})]
    files: list[Bar] = [(saved.name, {saved.holds: saved.bytes * saved.copies}) for saved in report.files]
    sections = [
        figure_section(
            f"The {moment} over time",
            stacked_figure(timeline),
            f"Allocated bytes by category after each event of the {moment}, its peak marked.",
        )
        for moment, timeline in (("save", report.save_timeline), ("restore", report.restore_timeline))
        if timeline is not None
    ]
    sections += [
        figure_section(
            "Memory",
            bars_figure(moments, usable_bytes=usable, top=_BEYOND),
            "On the device; the restore by category at its peak.",
        ),
        figure_section("Host memory held at once", bars_figure(host)),
        figure_section("On disk", bars_figure(files)),
        Section("As the terminal prints it", terminal_html(lambda console: render_checkpoint(report, console))),
    ]
    return page(f"vramsim checkpoint: {report.model}", f"Checkpoint of {report.model} on {report.target}", sections)
