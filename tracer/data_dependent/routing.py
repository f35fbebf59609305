"""MoE routing: the expert loads a router's picks are assumed to realise (``moe_routing``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["ROUTING_CHOICES", "Routing", "parse_routing"]

ROUTING_CHOICES = ("balanced", "worst-case", "capacity:F")
"""The ``moe_routing`` values (``F`` is a capacity factor >= 1, e.g. ``capacity:1.25``)."""


@dataclass(frozen=True, slots=True)
class Routing:
    """How many rows each MoE expert receives; see the module docstring."""

    kind: str
    """``balanced``, ``worst-case`` or ``capacity``."""
    factor: float = 1.0

    def loads(self, tokens: int, top_k: int, experts: int) -> list[int]:
        """Rows per expert for ``tokens`` tokens each picking ``top_k`` of ``experts``."""
        total = tokens * top_k
        if self.kind == "balanced" or (self.kind == "capacity" and self.factor == 1.0):
            base, extra = divmod(total, experts)
            return [base + (e < extra) for e in range(experts)]
        cap = tokens if self.kind == "worst-case" else min(tokens, math.ceil(self.factor * total / experts))
        loads = []
        for _ in range(experts):
            take = min(cap, total)
            loads.append(take)
            total -= take
        return loads

    def assignment(self, tokens: int, top_k: int, experts: int) -> torch.Tensor:
        """``(tokens, top_k)`` expert ids realising ``loads``, with distinct experts per token.

        Expert ids repeated by their load are laid column-wise (slot p -> token p % tokens,
        choice p // tokens); a run of at most ``tokens`` slots never hits one token twice.
        """
        loads = self.loads(tokens, top_k, experts)
        order = torch.tensor([e for e, n in enumerate(loads) for _ in range(n)], dtype=torch.long, device="cpu")
        return order.reshape(top_k, tokens).t().contiguous()

    @property
    def spec(self) -> str:
        """The option's canonical spelling (``capacity:1.25``)."""
        return f"capacity:{self.factor:g}" if self.kind == "capacity" else self.kind

    def describe(self) -> str:
        if self.kind == "worst-case":
            return "MoE routing assumed worst-case: every token picks the same top_k experts, which each receive all tokens"
        if self.kind == "capacity" and self.factor != 1.0:
            return (
                f"MoE routing assumed at capacity factor {self.factor:g}: experts fill up in order to "
                f"{self.factor:g} x tokens*top_k/num_experts rows each"
            )
        return (
            "MoE routing assumed balanced: each expert receives tokens*top_k/num_experts rows "
            "(top-k / argmax picks spread evenly)"
        )


def parse_routing(value: Any) -> Routing:
    """``"balanced" | "worst-case" | "capacity:F"`` -> ``Routing``; ``ValueError`` otherwise."""
    if isinstance(value, Routing):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in ("balanced", "worst-case"):
        return Routing(text)
    match = re.fullmatch(r"capacity:([0-9]*\.?[0-9]+)", text or "")
    if match and float(match.group(1)) >= 1 and math.isfinite(float(match.group(1))):
        return Routing("capacity", float(match.group(1)))
    raise ValueError(f"unknown moe_routing {value!r}; choose one of: {', '.join(ROUTING_CHOICES)} (F >= 1, e.g. capacity:1.25)")
