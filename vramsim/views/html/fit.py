"""``vramsim fit --html``: the sizes or GPUs the search traced against the usable memory, then the terminal's view."""

from __future__ import annotations

from vramsim.results.device_fit import DeviceFit
from vramsim.results.fit import LargestFit
from vramsim.results.strategy import StrategySearch
from vramsim.views.fit import held_flag, render_device_fit, render_fit, render_strategies
from vramsim.views.html.bars import Bar, bars_figure
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.terminal import terminal_html

__all__ = ["fit_html"]


def fit_html(fit: LargestFit | DeviceFit | None, search: StrategySearch | None = None) -> str:
    """The whole page: ``fit`` the largest sizes (or the GPUs judged), ``search`` the strategies tried first."""
    sections = []
    if search is not None:
        sections.append(Section("Strategies", terminal_html(lambda console: render_strategies(search, console))))
    if isinstance(fit, LargestFit):
        sections += [
            figure_section(
                "The largest that fit",
                bars_figure(_sizes(fit), usable_bytes=fit.usable_bytes),
                "Each bar a traced size: the largest that fits and the smallest traced that does not.",
            ),
            Section("Sizes", terminal_html(lambda console: render_fit(fit, console))),
        ]
    elif isinstance(fit, DeviceFit):
        bars: list[Bar] = [(v.device, {"on the device": v.device_bytes, "usable": v.usable_bytes}) for v in fit.devices]
        sections += [
            figure_section(
                "GPUs judged", bars_figure(bars, stacked=False), "The job's device figure beside each GPU's usable memory."
            ),
            Section("Verdict", terminal_html(lambda console: render_device_fit(fit, console))),
        ]
    model = search.model if search is not None else fit.model if fit is not None else ""
    return page(f"vramsim fit: {model}", f"What fits: {model}", sections)


def _sizes(fit: LargestFit) -> list[Bar]:
    """The largest fitting and first failing value of each option searched, as the command line spells them."""
    held = {"batch_size": held_flag("seq_len", fit.given["seq_len"]), "seq_len": held_flag("batch_size", fit.given["batch_size"])}
    bars: list[Bar] = []
    for largest in (fit.batch_size, fit.seq_len):
        if largest is None:
            continue
        flag = "--" + largest.option.replace("_", "-")
        at = held[largest.option]
        if largest.value is not None and largest.device_bytes is not None:
            bars.append((f"{flag} {largest.value:,} at {at}", {"fits: on the device": largest.device_bytes}))
        if largest.over is not None and largest.over_bytes is not None:
            bars.append((f"{flag} {largest.over:,} at {at}", {"does not fit: on the device": largest.over_bytes}))
    return bars
