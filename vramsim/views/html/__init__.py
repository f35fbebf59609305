"""Results as one self-contained HTML page each (``--html``): plotly figures inline, no network needed."""

from vramsim.views.html.checkpoint import checkpoint_html
from vramsim.views.html.compare import compare_html, compare_serve_html
from vramsim.views.html.fit import fit_html
from vramsim.views.html.plan import plan_html
from vramsim.views.html.report import report_html
from vramsim.views.html.serving import serve_html
from vramsim.views.html.timeline import overlaid_timelines

__all__ = [
    "checkpoint_html",
    "compare_html",
    "compare_serve_html",
    "fit_html",
    "overlaid_timelines",
    "plan_html",
    "report_html",
    "serve_html",
]
