"""vramsim: predict the GPU memory of a PyTorch job before it reaches a GPU.

The entry points (``simulate``, ``simulate_each``, ``compare``, ``inspect``, ``plan``, ``largest_fit``,
``cheapest_strategy``, ``sweep``, ``checkpoint``, ``serve``, ``compare_serve``, ``validate``, ``count_parameters``), the records
they return, the errors they raise, and the views that word the records (``report_text``, ``report_html``,
``compare_text``, ``advice_line``,
``format_bytes``) or write them to files (``write_memory_viz``, ``write_chrome_trace``, ``write_graph``). The
names are imported on first use (PEP 562), so ``vramsim.estimators`` and ``vramsim.errors`` load without torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vramsim.api import compare, count_parameters, inspect, plan, simulate, simulate_each
    from vramsim.checkpoints.checkpoint import checkpoint
    from vramsim.errors import ConfigError, ModelNotFoundError, TraceError, UnsupportedError, VramsimError
    from vramsim.results.advice import Advice
    from vramsim.results.checkpoint import CheckpointReport
    from vramsim.results.compare import Comparison, ServeComparison
    from vramsim.results.fit import LargestFit
    from vramsim.results.inspect import Inspection
    from vramsim.results.plan import Plan
    from vramsim.results.report import Assumption, LayerRow, PeakSite, Report
    from vramsim.results.serving import ServeReport
    from vramsim.results.strategy import StrategySearch
    from vramsim.results.sweep import Sweep
    from vramsim.results.validation import Validation
    from vramsim.search.fitting import largest_fit
    from vramsim.search.strategy import cheapest_strategy
    from vramsim.search.sweep import sweep
    from vramsim.serving.budget import serve
    from vramsim.serving.compare import compare_serve
    from vramsim.validation.validate import validate
    from vramsim.views.advice import advice_line
    from vramsim.views.chrome_trace import write_chrome_trace
    from vramsim.views.compare import compare_text
    from vramsim.views.graph_export import write_graph
    from vramsim.views.html import report_html
    from vramsim.views.memory_viz import write_memory_viz
    from vramsim.views.report import report_text
    from vramsim.views.units import format_bytes

__all__ = [
    "Advice",
    "Assumption",
    "CheckpointReport",
    "Comparison",
    "ConfigError",
    "Inspection",
    "LargestFit",
    "LayerRow",
    "ModelNotFoundError",
    "PeakSite",
    "Plan",
    "Report",
    "ServeComparison",
    "ServeReport",
    "StrategySearch",
    "Sweep",
    "TraceError",
    "UnsupportedError",
    "Validation",
    "VramsimError",
    "advice_line",
    "cheapest_strategy",
    "checkpoint",
    "compare",
    "compare_serve",
    "compare_text",
    "count_parameters",
    "format_bytes",
    "inspect",
    "largest_fit",
    "plan",
    "report_html",
    "report_text",
    "serve",
    "simulate",
    "simulate_each",
    "sweep",
    "validate",
    "write_chrome_trace",
    "write_graph",
    "write_memory_viz",
]

_HOMES = {
    "count_parameters": "api", "inspect": "api", "simulate": "api", "simulate_each": "api", "compare": "api",
    "plan": "api",
    "checkpoint": "checkpoints.checkpoint",
    "serve": "serving.budget",
    "compare_serve": "serving.compare",
    "largest_fit": "search.fitting",
    "cheapest_strategy": "search.strategy",
    "StrategySearch": "results.strategy",
    "sweep": "search.sweep", "Sweep": "results.sweep",
    "validate": "validation.validate",
    "ConfigError": "errors", "ModelNotFoundError": "errors", "TraceError": "errors", "UnsupportedError": "errors",
    "VramsimError": "errors",
    "Advice": "results.advice",
    "Assumption": "results.report", "LayerRow": "results.report", "PeakSite": "results.report",
    "Report": "results.report",
    "CheckpointReport": "results.checkpoint",
    "Comparison": "results.compare", "ServeComparison": "results.compare",
    "LargestFit": "results.fit",
    "Inspection": "results.inspect",
    "Plan": "results.plan",
    "ServeReport": "results.serving",
    "Validation": "results.validation",
    "advice_line": "views.advice",
    "compare_text": "views.compare",
    "format_bytes": "views.units",
    "report_html": "views.html",
    "write_graph": "views.graph_export",
    "report_text": "views.report",
    "write_chrome_trace": "views.chrome_trace", "write_memory_viz": "views.memory_viz",
}  # fmt: skip
"""The module each public name lives in."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vramsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
