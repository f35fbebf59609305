"""The results of ``vramsim compare``: variants of one job, each with its report, and the traces they took; and
``compare --serve``'s, serving deployments of one model, each with its budget or the engine's refusal."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vramsim.results.report import Report
from vramsim.results.serving import ServeReport

__all__ = ["Compared", "Comparison", "ServeCompared", "ServeComparison"]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeCompared:
    """One serving variant and its budget, or why the engine would not start with it."""

    label: str
    """As ``Compared.label``: its flags as given, its name in a variants file, or its key in ``variants``."""
    report: ServeReport | None
    """Its budget, as ``serve`` reports it; None when the engine refuses to start."""
    refused: str | None = None
    """The engine's refusal (the one line ``vramsim serve`` exits with), in the API's words; None: it starts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeComparison:
    """Two or more serving deployments of one model side by side, in the order given."""

    model: str
    variants: list[ServeCompared]
    traces: int
    """Ranks traced (cache probes and profile run): variants that differ only in the KV cache dtype, the memory
    utilization or CUDA graphs share one."""
    trace_seconds: float
    """Wall time of all the traces and budgets."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim compare --serve --json`` prints exactly this."""
        return asdict(self)

    def __repr__(self) -> str:
        return f"<ServeComparison model={self.model} variants={len(self.variants)} traces={self.traces}>"
