"""A training step's accumulation micro-steps as the traced program ran them: each one's forward and backward
clocks, and when each gradient was ready in it.

With ``grad_accum`` micro-steps the tracer runs forward and backward that many times before the optimizer step:
the first backward makes each ``.grad`` (the gradient storage the graph marks), the later ones add a new
gradient into it in place (AccumulateGrad's ``add_``). A data-parallel library acts on a gradient when it is
ready: DDP's and DeepSpeed's hooks and FSDP2's post-backward run after the accumulation.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx

from vramsim.tracer.graph import storage_node

__all__ = ["MicroStep", "micro_steps"]

_BACKWARD = ("backward", "recompute")


@dataclass(slots=True)
class MicroStep:
    """One forward and backward of a step, by clock."""

    first_clock: int
    """The clock before its first forward op's allocations (the step's first clock for the first micro-step)."""
    forward_end: int
    """The last clock of its forward."""
    backward_start: int
    """The first clock of its backward (its first backward op's)."""
    last_clock: int = 0
    """The last clock of its backward (recomputation included)."""
    ready: dict[str, int] = field(default_factory=dict)
    """Weight name -> the clock its gradient was ready: made (the first micro-step) or added into ``.grad``."""
    added: dict[int, int] = field(default_factory=dict)
    """A later micro-step's new gradients (sid) -> the ``.grad`` storage (sid) AccumulateGrad added them into."""


def micro_steps(graph: nx.MultiDiGraph, made: dict[int, dict[str, tuple[int, int]]]) -> dict[int, list[MicroStep]]:
    """Each training step's micro-steps, in order. ``made``: step -> weight name -> (sid, clock made) of the
    gradient storages the graph marks (``Rank.grads``)."""
    ops: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    for node, attrs in graph.nodes(data=True):
        if node[0] == "op" and attrs["phase"] in ("forward", *_BACKWARD) and attrs["step"] >= 0:
            ops[attrs["step"]].append((attrs["clock_after"], attrs["phase"], node[1]))
    found: dict[int, list[MicroStep]] = {}
    for step, each in ops.items():
        each.sort(key=lambda item: (item[0], item[2]))
        steps: list[MicroStep] = []
        started = False  # whether the current micro-step's backward has begun
        for clock, phase, index in each:
            if phase == "forward" and (not steps or started):
                first = graph.graph["step_clocks"][step][0] if not steps else clock - _allocations(graph, index)
                steps.append(MicroStep(first_clock=first, forward_end=clock, backward_start=clock + 1))
                started = False
            elif phase == "forward":
                steps[-1].forward_end = clock
                steps[-1].backward_start = clock + 1
            elif steps:
                if not started and phase == "backward":
                    steps[-1].backward_start = clock
                    started = True
                steps[-1].last_clock = clock
        found[step] = steps
    for step, gradients in made.items():
        _ready_clocks(graph, found.get(step, []), gradients)
    return found


def _allocations(graph: nx.MultiDiGraph, index: int) -> int:
    return sum(1 for _, _, key in graph.out_edges(("op", index), keys=True) if key == "produced")


def _ready_clocks(graph: nx.MultiDiGraph, steps: list[MicroStep], gradients: dict[str, tuple[int, int]]) -> None:
    """The first micro-step's gradient is ready when made; a later one's when the last backward op reading the
    ``.grad`` storage in that micro-step (the in-place ``add_``) has run."""
    if not steps:
        return
    for name, (sid, clock) in gradients.items():
        steps[0].ready[name] = clock
        reads = [
            (graph.nodes[op]["clock_after"], op)
            for _, op, key in graph.out_edges(storage_node(sid), keys=True)
            if key == "read" and graph.nodes[op]["phase"] == "backward"
        ]
        for micro in steps[1:]:
            inside = [read for read in reads if micro.backward_start <= read[0] <= micro.last_clock]
            if not inside:
                continue
            clock, op = max(inside)
            micro.ready[name] = clock
            for source, _, key in graph.in_edges(op, keys=True):
                if key == "read" and source[1] != sid and graph.nodes[source]["category"] != "parameters":
                    micro.added[source[1]] = sid
