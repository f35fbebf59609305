"""vramsim: predict the GPU memory of a PyTorch job before it reaches a GPU.

The names below are imported on first use (PEP 562), so ``vramsim.estimators`` and
``vramsim.errors`` load without torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import count_parameters, simulate, simulate_each
    from .checkpoint_report import CheckpointReport
    from .errors import ConfigError, ModelNotFoundError, TraceError, UnsupportedError, VramsimError
    from .fitting import LargestFit, largest_fit
    from .report import Assumption, LayerRow, PeakSite, Report
    from .strategy import StrategySearch, cheapest_strategy
    from .training_checkpoint import checkpoint
    from .validation import Validation, validate

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
    "checkpoint": "training_checkpoint", "CheckpointReport": "checkpoint_report",
    "ConfigError": "errors", "ModelNotFoundError": "errors", "TraceError": "errors", "UnsupportedError": "errors",
    "VramsimError": "errors",
    "LargestFit": "fitting", "largest_fit": "fitting",
    "Assumption": "report", "LayerRow": "report", "PeakSite": "report", "Report": "report",
    "StrategySearch": "strategy", "cheapest_strategy": "strategy",
    "Validation": "validation", "validate": "validation",
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
