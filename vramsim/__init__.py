"""vramsim: predict the GPU memory of a PyTorch job before it reaches a GPU.

The names below are imported on first use (PEP 562), so ``vramsim.estimators`` and
``vramsim.errors`` load without torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vramsim.api import count_parameters, simulate, simulate_each
    from vramsim.checkpoints.checkpoint import checkpoint
    from vramsim.errors import ConfigError, ModelNotFoundError, TraceError, UnsupportedError, VramsimError
    from vramsim.results.checkpoint import CheckpointReport
    from vramsim.results.fit import LargestFit
    from vramsim.results.report import Assumption, LayerRow, PeakSite, Report
    from vramsim.results.validation import Validation
    from vramsim.search.fitting import largest_fit
    from vramsim.search.strategy import StrategySearch, cheapest_strategy
    from vramsim.validation.validate import validate

__all__ = [
    "Assumption",
    "CheckpointReport",
    "ConfigError",
    "LargestFit",
    "LayerRow",
    "ModelNotFoundError",
    "PeakSite",
    "Report",
    "StrategySearch",
    "TraceError",
    "UnsupportedError",
    "Validation",
    "VramsimError",
    "cheapest_strategy",
    "checkpoint",
    "count_parameters",
    "largest_fit",
    "simulate",
    "simulate_each",
    "validate",
]

_HOMES = {
    "count_parameters": "api", "simulate": "api", "simulate_each": "api",
    "checkpoint": "checkpoints.checkpoint", "CheckpointReport": "results.checkpoint",
    "ConfigError": "errors", "ModelNotFoundError": "errors", "TraceError": "errors", "UnsupportedError": "errors",
    "VramsimError": "errors",
    "LargestFit": "results.fit", "largest_fit": "search.fitting",
    "Assumption": "results.report", "LayerRow": "results.report", "PeakSite": "results.report", "Report": "results.report",
    "StrategySearch": "search.strategy", "cheapest_strategy": "search.strategy",
    "Validation": "results.validation", "validate": "validation.validate",
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
