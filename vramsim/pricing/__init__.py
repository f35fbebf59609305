"""Prices for renting GPUs: a price sheet the user owns, a job's duration, and the cheapest bill.

The entry points the ``plan`` command (still to come) calls: ``load_sheet`` reads a sheet, ``given_duration`` or
``training_duration`` (from ``step_flops`` of a traced step) says how long the job runs, ``quote`` bills it.
"""

from .billing import quote
from .duration import given_duration, peak_tflops, step_flops, training_duration
from .load import load_sheet, parse_sheet
from .periods import Period
from .sheet import Offer, Option, PriceSheet

__all__ = [
    "Offer",
    "Option",
    "Period",
    "PriceSheet",
    "given_duration",
    "load_sheet",
    "parse_sheet",
    "peak_tflops",
    "quote",
    "step_flops",
    "training_duration",
]
