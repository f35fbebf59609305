"""``vramsim plan --html``: each row's total as a bar, cheapest first, each row's cheapest bill, then the
terminal's view."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from vramsim.results.plan import Plan
from vramsim.views.html.page import Section, figure_section, page
from vramsim.views.html.terminal import terminal_html
from vramsim.views.plan import render_plan, setting_words
from vramsim.views.quote import format_money, render_quote
from vramsim.views.units import format_bytes

__all__ = ["plan_html"]


def plan_html(plan: Plan) -> str:
    """The whole page: the totals figure, the ranked rows as a table, the cheapest's quote, the terminal's view."""
    sections = []
    if plan.rows:
        sections += [
            figure_section(
                "Totals",
                _totals_figure(plan),
                f"Each offer and GPU count that holds the job, cheapest first, in {plan.currency}; prices from {plan.sheet}.",
            ),
            Section("Rows", _rows_table(plan)),
        ]
        best = plan.rows[0].quote
        sections.append(Section("The cheapest quote", terminal_html(lambda console: render_quote(best, console))))
    sections.append(Section("Plan", terminal_html(lambda console: render_plan(plan, console))))
    return page(f"vramsim plan: {plan.model}", f"Where to rent: {plan.model}", sections)


def _totals_figure(plan: Plan) -> go.Figure:
    labels = [f"{row.quote.offer} x{row.quote.gpus}" for row in plan.rows]
    totals = [float(row.quote.total) for row in plan.rows]
    words = [format_money(row.quote.total, plan.currency) for row in plan.rows]
    figure = go.Figure(go.Bar(x=labels, y=totals, text=words, hovertemplate="%{x}: %{text}<extra></extra>"))
    figure.update_layout(yaxis_title=plan.currency)
    return figure


def _rows_table(plan: Plan) -> str:
    """The terminal's columns, with the order key of each row."""
    headers = ("offer", "GPUs", "setting", "per GPU", "free", "hours", "total", "order key")
    body = "".join(
        "<tr>"
        f"<td>{html.escape(row.quote.offer)}</td><td class=n>{row.quote.gpus} x {html.escape(row.quote.device)}</td>"
        f"<td>{html.escape(setting_words(row))}</td><td class=n>{format_bytes(row.setting.device_bytes)}</td>"
        f"<td class=n>{format_bytes(row.spare_bytes)}</td><td class=n>{row.quote.duration.hours:,.1f}</td>"
        f"<td class=n>{html.escape(format_money(row.quote.total, plan.currency))}</td>"
        f"<td><code>{row.quote.key}</code></td></tr>"
        for row in plan.rows
    )
    return f"<table><tr>{''.join(f'<th>{h}</th>' for h in headers)}</tr>{body}</table>"
