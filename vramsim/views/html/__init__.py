"""Results as one self-contained HTML page each (``--html``): plotly figures inline, no network needed."""

from vramsim.views.html.checkpoint import checkpoint_page
from vramsim.views.html.fit import fit_page
from vramsim.views.html.report import report_page
from vramsim.views.html.serving import serve_page
from vramsim.views.html.timeline import overlaid_timelines

__all__ = ["checkpoint_page", "fit_page", "overlaid_timelines", "report_page", "serve_page"]
