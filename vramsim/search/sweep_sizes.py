"""Sizes of one program structure as polynomials in batch and sequence, proven by traces, never assumed.

Two traces have the same structure when every record but its sizes is equal, op for op, storage for storage:
the same ops in the same order reading and making the same storages, the same frees, holds and blocks on the same
clocks (``structure``). Their sizes (``quantities``: each storage's bytes and shape, each saved tensor's bytes,
each op's FLOPs) then differ only through the batch size ``b`` and sequence length ``s``. ``SizeFit`` interpolates
each quantity exactly (integer and rational arithmetic, no floats) as a polynomial with the monomials
``b**i * s**j``, ``i < len(batches)``, ``j < len(seqs)``, through the traces of a tensor grid of points; a further
traced point checks every quantity to the byte (``SizeFit.predicts``). A point between them is then answered by
evaluating the polynomials, and refused where any value is not a whole number of 0 or more.

``Resized`` writes one point's quantities into a graph built from a trace of that structure: the graph is then the
one ``build_graph`` would build from that point's own trace, which every analysis reads as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from fractions import Fraction
from itertools import product
from math import lcm
from operator import attrgetter
from typing import Any

import networkx as nx

from vramsim.estimators.timeline import Timeline
from vramsim.tracer.graph import op_node, saved_edges, storage_nodes
from vramsim.tracer.records import HoldRecord, OpRecord, StorageRecord, Trace, UnitRecord

__all__ = ["SIZE_FIELDS", "Resized", "SizeFit", "block_sources", "quantities", "structure"]

SIZE_FIELDS = frozenset({"nbytes", "shape", "flops"})
"""The record fields that are sizes (a shape counts by its dimensions); every other field is structure."""


def structure(trace: Trace) -> tuple[Any, ...]:
    """Everything ``trace`` records but its sizes (a shape's length kept): equal for two traces of one program."""
    parts: list[Any] = []
    for spec in fields(trace):
        value = getattr(trace, spec.name)
        if isinstance(value, list) and value and hasattr(value[0], "__dataclass_fields__"):
            parts.append(tuple(_record_structure(record) for record in value))
        else:
            parts.append(tuple(value) if isinstance(value, list) else value)
    return tuple(parts)


def _record_structure(record: object) -> tuple[Any, ...]:
    values = _STRUCTURE_FIELDS[type(record)](record)
    shape = getattr(record, "shape", None)
    return values if shape is None else (*values, len(shape))


def _structure_fields(record_type: type) -> Callable[[Any], tuple[Any, ...]]:
    """A record type's structure fields, read at once (millions of records a sweep: ``fields`` per record is slow)."""
    return attrgetter(*(spec.name for spec in fields(record_type) if spec.name not in SIZE_FIELDS))


_STRUCTURE_FIELDS: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    kind: _structure_fields(kind) for kind in (StorageRecord, OpRecord, HoldRecord, UnitRecord)
}
"""Each record type a ``Trace`` lists, with its structure fields' getter."""


def quantities(trace: Trace) -> list[int]:
    """Every size of ``trace``, in the order ``Resized`` writes them: storage bytes, storage shapes, saved bytes, FLOPs."""
    values = [storage.nbytes for storage in trace.storages]
    for storage in trace.storages:
        values.extend(storage.shape)
    values.extend(hold.nbytes for hold in trace.holds)
    values.extend(op.flops for op in trace.ops)
    return values


def block_sources(timeline: Timeline, values: Sequence[int], storages: int) -> list[int] | None:
    """Each of ``timeline``'s blocks' index in ``values`` (a point's ``quantities``, whose first ``storages`` are the
    storages' bytes): a traced storage's own, a recomputed or fetched copy's the storage it copies; ``None`` where a
    block's bytes are not that storage's at this point (a block of no storage, a copy of a saved tensor's bytes)."""
    sources = []
    for key, block in enumerate(timeline.blocks):
        sid = key if key < storages else block.copy_of
        if sid is None or sid >= storages or block.nbytes != values[sid]:
            return None
        sources.append(sid)
    return sources


class SizeFit:
    """Each quantity's polynomial in ``(b, s)`` through the traces of the grid ``batches x seqs``."""

    def __init__(self, batches: Sequence[int], seqs: Sequence[int], traced: dict[tuple[int, int], list[int]]) -> None:
        """``traced``: each grid point's ``quantities``, all of one structure."""
        self.batches, self.seqs = tuple(batches), tuple(seqs)
        columns = zip(*(traced[point] for point in product(self.batches, self.seqs)), strict=True)
        unique: dict[tuple[int, ...], int] = {}
        self._index = [unique.setdefault(column, len(unique)) for column in columns]
        self._columns = list(unique)

    def evaluate(self, b: int, s: int) -> list[int] | None:
        """The quantities at ``(b, s)``; ``None`` where one is not a whole number of 0 or more."""
        values = self.distinct(b, s)
        return None if values is None else self.expand(values)

    def expand(self, values: list[int]) -> list[int]:
        """Every quantity from ``distinct``'s values."""
        return [values[i] for i in self._index]

    def distinct_of(self, quantities: Sequence[int]) -> list[int]:
        """Where each of the ``quantities`` (indices into a point's) is among ``distinct``'s values."""
        return [self._index[i] for i in quantities]

    def distinct(self, b: int, s: int) -> list[int] | None:
        """The values at ``(b, s)`` of the distinct polynomials, quantities equal on every node of the grid
        sharing one (``expand`` gives every quantity); ``None`` where one is not a whole number of 0 or more."""
        weights = [wb * ws for wb, ws in product(_lagrange(self.batches, b), _lagrange(self.seqs, s))]
        scale = lcm(*(weight.denominator for weight in weights))
        numerators = [weight.numerator * (scale // weight.denominator) for weight in weights]
        values = []
        for column in self._columns:
            total = sum(n * v for n, v in zip(numerators, column, strict=True))
            if total % scale or total < 0:
                return None
            values.append(total // scale)
        return values

    def predicts(self, b: int, s: int, traced: list[int]) -> bool:
        """Whether the polynomials give ``traced`` (a further trace's quantities) to the byte."""
        return self.evaluate(b, s) == traced


def _lagrange(nodes: tuple[int, ...], x: int) -> list[Fraction]:
    """The Lagrange basis of ``nodes`` at ``x``: the weights that interpolate values on ``nodes`` exactly."""
    weights = []
    for i, node in enumerate(nodes):
        weight = Fraction(1)
        for j, other in enumerate(nodes):
            if j != i:
                weight *= Fraction(x - other, node - other)
        weights.append(weight)
    return weights


class Resized:
    """A graph of one structure, whose sizes are rewritten for each point it answers.

    The sweep owns the graph (built from a worker's records, shared with nothing); writing a point's sizes also
    drops the what-ifs and replays kept with it (``Analysis``), which were the previous point's."""

    def __init__(self, graph: nx.MultiDiGraph, trace: Trace) -> None:
        self.graph = graph
        self._storages = [attrs for _, attrs in storage_nodes(graph)]
        self._holds = [attrs for _, _, attrs in saved_edges(graph)]
        self._ops = [graph.nodes[op_node(op.index)] for op in trace.ops]
        self._ranks = [len(storage.shape) for storage in trace.storages]
        self.storages = len(trace.storages)
        """Storages of the structure: the first quantities of a point are their bytes."""

    def write(self, values: list[int]) -> nx.MultiDiGraph:
        """The graph with ``values`` (a point's ``quantities``) as its sizes."""
        count = len(self._storages)
        position = count
        for attrs, nbytes in zip(self._storages, values[:count], strict=True):
            attrs["nbytes"] = nbytes
        for attrs, rank in zip(self._storages, self._ranks, strict=True):
            attrs["shape"] = tuple(values[position : position + rank])
            position += rank
        for attrs in self._holds:
            attrs["nbytes"] = values[position]
            position += 1
        for attrs in self._ops:
            attrs["flops"] = values[position]
            position += 1
        if position != len(values):
            raise ValueError(f"{len(values)} sizes for a structure of {position}")
        self.graph.graph.pop("analysis_outcomes", None)
        self.graph.graph.pop("what_ifs", None)
        return self.graph
