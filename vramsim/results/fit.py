"""The result of ``vramsim fit``: the largest batch size and sequence length that fit, each a traced fact."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Largest", "LargestFit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Largest:
    """The largest value of one option that fits, with the other options as given."""

    option: str
    """``batch_size`` or ``seq_len``."""
    value: int | None
    """The largest traced value that fits; None when the smallest (1) does not."""
    device_bytes: int | None
    """What nvidia-smi would show at ``value``, traced."""
    over: int | None
    """The smallest traced value that does not fit; None when ``value`` is ``bound``, or none was traced."""
    over_bytes: int | None
    bound: int
    """The largest value the search may try."""
    bound_by: str
    """What sets ``bound``: a config field of the model (``max_position_embeddings``) or vramsim's own limit."""
    step: int
    """The values tried are multiples of it."""
    exact: bool
    """True when ``over`` is ``value`` + ``step`` (or ``value`` is ``bound``): no value of the search between is untraced."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LargestFit:
    """The largest batch size (at the given sequence length) and sequence length (at the given batch size)."""

    model: str
    target: str
    headroom: float
    usable_bytes: int
    """The target's memory less the headroom: what a size must fit in."""
    batch_size: Largest | None
    """None when not searched (``sizes``)."""
    seq_len: Largest | None
    given: dict[str, int]
    """The batch size and sequence length asked for; each search holds the other one at its given value."""
    traces: int
    """Sizes traced for the search, the given one included (``MAX_TRACES``), though it was handed in traced."""
    trace_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim fit --json`` prints exactly this."""
        return asdict(self)

    def __repr__(self) -> str:
        found = {largest.option: largest.value for largest in (self.batch_size, self.seq_len) if largest is not None}
        return f"<LargestFit {' '.join(f'{k}={v}' for k, v in found.items())} target={self.target}>"
