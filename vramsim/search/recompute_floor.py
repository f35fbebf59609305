"""The least share of a step ``auto`` can recompute on a context-parallel layout that has not been traced.

A context-parallel rank of tp and cp runs the program of tp on ``seq_len / cp`` tokens (``workload/build.py``): the
ops of a traced reference of the same tp at cp_r (cp a multiple of cp_r), in the same order, each on 1/k of its
tokens (k = cp / cp_r). Every op with a flop formula in a decoder's step is then one of two kinds:

- a matmul (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm``): one of its dimensions is the tokens (a linear's
  rows, a weight gradient's contraction, the rotary embedding's positions), so it runs 1/k of the reference's FLOPs;
- an SDPA kernel, forward or backward: its queries and its keys are both the rank's tokens (the ring's other chunks
  are not traced), so it runs 1/k^2 of them.

So the step's FLOPs on the layout are ``(S - A) / k + A / k^2`` exactly (S the reference's step FLOPs, A its SDPA
FLOPs), and a plan's recomputed FLOPs are at least ``(R - a) / k + a / k^2``, R the reference's recompute of the plan
and a the SDPA FLOPs of the blocks the plan recomputes (at most the SDPA FLOPs it recomputes). Their ratio is a floor
of the plan's share on the layout, the figure ``auto``'s cost key reads. A program with another flop formula (a
convolution), a matmul holding two token dimensions (attention as matmuls, whose scores are quadratic) or no SDPA
gets no floor: the layout is traced.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import networkx as nx

__all__ = ["RecomputeFloor", "step_ops"]

MATMULS = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._scaled_mm"})
"""Flop-counted ops with one token dimension in a decoder's step."""


def step_ops(graph: nx.MultiDiGraph) -> list[tuple[int, dict[str, Any]]]:
    """The last step's forward and backward ops (index, attributes): what a step's FLOPs and a what-if's recompute
    cost are counted over."""
    stepped = [
        (node[1], data) for node, data in graph.nodes(data=True) if node[0] == "op" and data["phase"] in ("forward", "backward")
    ]
    last_step = max((data["step"] for _, data in stepped), default=0)
    return [(index, data) for index, data in stepped if data["step"] == last_step]


def _attention(name: str) -> bool:
    return "attention" in name and "flex" not in name


@dataclass(frozen=True, slots=True)
class RecomputeFloor:
    """A reference's step FLOPs split into what runs 1/k and 1/k^2 of them on a layout k times its context
    parallelism (the module's docstring)."""

    cp: int
    """The reference's context-parallel degree."""
    step_flops: int
    attention_flops: int
    """Of ``step_flops``, the SDPA kernels'."""
    unit_attention_flops: dict[int, int]
    """SDPA FLOPs of each checkpointable block's forward in the last step, by block index."""

    @classmethod
    def of(cls, graph: nx.MultiDiGraph, *, cp: int, tokens: int) -> RecomputeFloor | None:
        """The floor read off ``graph``, traced at ``cp`` with ``tokens`` per sequence; None where an op's FLOPs may
        not scale as the module's docstring says."""
        ops = step_ops(graph)
        attention = 0
        for index, data in ops:
            if not data["flops"]:
                continue
            if _attention(data["name"]):
                attention += data["flops"]
            elif data["name"] not in MATMULS or _quadratic(graph, index, tokens):
                return None
        if not attention:
            return None
        units = graph.graph["units"]
        last_step = max((unit.step for unit in units), default=0)
        nodes = graph.nodes
        per_unit = {
            unit.index: sum(
                nodes["op", op]["flops"] for op in range(unit.first_op, unit.last_op + 1) if _attention(nodes["op", op]["name"])
            )
            for unit in units
            if unit.step == last_step
        }
        return cls(
            cp=cp, step_flops=sum(data["flops"] for _, data in ops), attention_flops=attention, unit_attention_flops=per_unit
        )

    def share(self, recomputed_flops: int, blocks: int, cp: int) -> Fraction:
        """The least share of the step a plan recomputes on a layout of context parallelism ``cp`` (a multiple of the
        reference's), given its ``recomputed_flops`` on the reference over its first ``blocks`` blocks."""
        k = cp // self.cp
        assert k * self.cp == cp, "the layout's context parallelism is a multiple of the reference's"
        recomputed_attention = sum(self.unit_attention_flops.get(index, 0) for index in range(blocks))
        step = Fraction(self.step_flops - self.attention_flops, k) + Fraction(self.attention_flops, k * k)
        recomputed = Fraction(recomputed_flops - recomputed_attention, k) + Fraction(recomputed_attention, k * k)
        return max(recomputed, Fraction(0)) / max(step, Fraction(1))


def _quadratic(graph: nx.MultiDiGraph, index: int, tokens: int) -> bool:
    """Whether the matmul ``index`` produced a tensor with two token dimensions (attention scores)."""
    for _, (_, sid), key in graph.out_edges(("op", index), keys=True):
        if key == "produced" and sum(1 for size in graph.nodes["storage", sid]["shape"] if size == tokens) >= 2:
            return True
    return False
