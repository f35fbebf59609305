"""vramsim: predict the GPU memory of a PyTorch job before it reaches a GPU."""

from .api import count_parameters, simulate
from .errors import ConfigError, ModelNotFoundError, TraceError, UnsupportedError, VramsimError
from .report import Assumption, LayerRow, PeakSite, Report
from .validation import Validation, validate

__all__ = [
    "Assumption",
    "ConfigError",
    "LayerRow",
    "ModelNotFoundError",
    "PeakSite",
    "Report",
    "TraceError",
    "UnsupportedError",
    "Validation",
    "VramsimError",
    "count_parameters",
    "simulate",
    "validate",
]
