"""The result of ``vramsim fit --strategies``: every parallel setting measured, cheapest first."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SCHEMES", "Candidate", "Refusal", "RuledOut", "Setting", "StrategySearch"]

SCHEMES: dict[str, dict[str, Any]] = {
    "DDP": {"zero": 0, "fsdp": "no"},
    "ZeRO-1": {"zero": 1, "fsdp": "no"},
    "ZeRO-2": {"zero": 2, "fsdp": "no"},
    "FSDP2 grad-op": {"zero": 0, "fsdp": "grad-op"},
    "ZeRO-3": {"zero": 3, "fsdp": "no"},
    "FSDP2 full": {"zero": 0, "fsdp": "full"},
}
"""The data-parallel schemes tried over more than one data-parallel rank, as ``simulate`` options."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One parallel setting: a layout (tensor x pipeline x context x expert parallel, the rest data parallel), a
    data-parallel scheme and a checkpointing choice. The search weighs settings; what it found of one is a
    ``Candidate`` (measured on its trace) or a ``RuledOut`` (its lower bound over the usable memory), each the
    setting and those facts."""

    gpus: int
    tp: int = 1
    pp: int = 1
    pp_schedule: str | None = None
    cp: int = 1
    ep: int = 1
    scheme: str
    """A name of ``SCHEMES``; ``one GPU`` or ``one replica`` without data parallelism."""
    checkpointing: str
    """As tried: a uniform choice or ``auto``."""

    @property
    def dp(self) -> int:
        """Data-parallel ranks the weights are replicated or sharded over (context- and expert-parallel ranks among
        them; an expert's weights over dp / ep)."""
        return self.gpus // (self.tp * self.pp)

    @property
    def trace_key(self) -> tuple[int, int, int]:
        """What changes the traced program: a tensor-, expert- or context-parallel rank runs another one."""
        return self.tp, self.ep, self.cp

    @property
    def group(self) -> tuple[Any, ...]:
        """The setting without its checkpointing: ``full`` bounds the memory of the whole group from below."""
        return self.gpus, self.tp, self.pp, self.cp, self.ep, self.pp_schedule, self.scheme

    def options(self) -> dict[str, Any]:
        """As ``simulate`` options: its degrees above 1, its scheme's sharding (DDP is the default), its checkpointing."""
        given: dict[str, Any] = {"gpus": self.gpus}
        for name in ("tp", "pp", "pp_schedule", "cp", "ep"):
            value = getattr(self, name)
            if value not in (1, None):
                given[name] = value
        given |= {k: v for k, v in SCHEMES.get(self.scheme, {}).items() if v not in (0, "no")}
        return given | {"checkpointing": self.checkpointing}


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate(Setting):
    """One setting and what one rank of it (a pipeline's busiest stage) takes, measured on its trace."""

    plan: str
    """The checkpointing run: ``auto``'s per-layer plan, else ``checkpointing``."""
    device_bytes: int
    peak_bytes: int
    fits: bool
    recomputed: float
    """Recomputed FLOPs as a share of the step's (forward and backward)."""
    recomputed_ops: float
    """Recomputed ops as a share of the step's: what tells a selective choice (its FLOPs about 0) from none."""
    bubble: float
    """The pipeline's idle time as a share of its ideal step (``PIPELINE_BUBBLE``)."""
    communication: float
    """Bytes one rank sends per micro-batch, every axis added (``estimators/communication.py``)."""

    @property
    def key(self) -> tuple[float, ...]:
        """The order of cost beyond memory (the module's docstring)."""
        return self.gpus, round(self.recomputed + self.bubble, 9), self.recomputed_ops, self.communication, self.device_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A layout not tried: vramsim or the model refuses it (tracing its rank, or analysing one setting of it)."""

    gpus: int | None
    """None when the rank's trace is refused: every GPU count of the layout."""
    tp: int
    pp: int
    cp: int
    ep: int
    scheme: str | None
    """None when the rank's trace is refused: every scheme."""
    reason: str
    """The error vramsim raised, as it words it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuledOut(Setting):
    """A setting never measured: the least memory its busiest rank holds (``search/bounds.py``) is over the usable."""

    bound_bytes: int
    """The lower bound of its busiest rank's device memory."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategySearch:
    """Every candidate measured, cheapest first, and the first that fits."""

    model: str
    target: str
    usable_bytes: int
    max_gpus: int
    candidates: list[Candidate]
    cheapest: Candidate | None
    """None when none fits on up to ``max_gpus`` GPUs."""
    traces: int
    """Programs traced: one, plus one per tensor-, context- or expert-parallel degree a measured candidate ran."""
    skipped: int
    """Candidates not measured: their group's ``full`` checkpointing does not fit, or a cheaper one fit first."""
    ruled_out: list[RuledOut]
    """Candidates never measured (nor their layout traced for them): the least memory any rank of theirs holds
    (``search/bounds.py``) is above the usable memory."""
    refused: list[Refusal] = field(default_factory=list)
    """Layouts the model or vramsim refuses, each once, with the reason."""
    trace_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim fit --strategies --json`` prints it under ``strategies``."""
        return asdict(self)

    def options(self) -> dict[str, Any]:
        """The cheapest candidate as ``simulate`` options (empty when none fits)."""
        return {} if self.cheapest is None else self.cheapest.options()
