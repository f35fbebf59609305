"""The result of ``vramsim compare``: variants of one job, each with its report, and the traces they took."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vramsim.results.report import Report

__all__ = ["Compared", "Comparison"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Compared:
    """One variant of the job and its report."""

    label: str
    """The variant's name: its flags as given on the command line (empty: the shared flags alone), its name in a
    variants file, or its key in ``vramsim.compare``'s ``variants``."""
    trace: int
    """Which of the comparison's traces its report comes from (0: the first): variants that differ only in what the
    graph answers (``ANALYSIS_OPTIONS``) share one."""
    report: Report


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Two or more variants of one job side by side, in the order given."""

    model: str
    variants: list[Compared]
    traces: int
    """Distinct programs traced: one per set of variants that differ only in analysis options."""
    trace_seconds: float
    """Wall time of all the traces and their reports."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim compare --json`` prints exactly this."""
        return asdict(self)

    def __repr__(self) -> str:
        return f"<Comparison model={self.model} variants={len(self.variants)} traces={self.traces}>"
