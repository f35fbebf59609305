"""The traced program as a networkx graph of ops and storages: what the analyses read.

Nodes:

- ``("op", i)``: one aten op, with ``name`` (the op as the target's kernel choice ran it: SDPA is
  ``_scaled_dot_product_cudnn_attention`` on an H100, ``_scaled_dot_product_flash_attention_for_cpu``
  on the CPU), ``module``, ``phase``, ``step``, ``clock_after`` and ``flops``.
- ``("storage", sid)``: one storage, with ``nbytes``, ``dtype``, ``shape``, ``category`` (its role),
  ``owner`` (a weight's own name; the parameter a gradient or optimizer state belongs to), ``module``, ``phase``,
  ``step``, ``op`` (the op that allocated it), ``alloc_at`` and ``free_at`` (timeline positions,
  ``free_at`` ``None`` while never freed) and ``unreferenced`` (the clock after which only
  autograd held it, or ``None``).

Edges, keyed by their kind:

- ``op -> storage``, key ``"produced"``: the op allocated the storage.
- ``storage -> op``, key ``"read"``: the op read the storage.
- ``storage -> op``, key ``("saved", n)``: the op's backward saved it (the n-th ``SavedVariable``
  of the trace; an op may save one storage twice), with ``nbytes`` (the saved tensor's own
  bytes), ``unit`` (the checkpointable block running then, an index in ``units``, or ``None``),
  ``ops_before`` (ops run before it was saved), ``pack_clock``, ``unpack_clock`` (when backward
  read it back) and ``release_clock`` (when autograd let it go); ``None`` where that never
  happened. The op is the one that produced the storage when it is an output saved right after
  its op ran, else the op about to run (an op saves its inputs before it runs).

Graph attributes: ``step_clocks`` (first and last clock of each step), ``decode_clocks``
(``Trace.decode_clocks``), ``units`` (the blocks a
checkpoint can wrap, ``UnitRecord``), ``nested_units`` (whether such blocks ran inside others), ``head_module``
(``Trace.head_module``), ``managed`` (``Trace.managed``) and ``last_clock``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import networkx as nx

from .collector import collector_paused
from .records import BEFORE_TRACE, Trace

__all__ = ["build_graph", "op_node", "saved_edges", "storage_node", "storage_nodes"]


def op_node(index: int) -> tuple[str, int]:
    return ("op", index)


def storage_node(sid: int) -> tuple[str, int]:
    return ("storage", sid)


@collector_paused()
def build_graph(trace: Trace) -> nx.MultiDiGraph:
    """The graph of ``trace``, made with the cyclic collector paused: its node and edge dicts, a few per op and
    storage, would otherwise set off full collections of the heap the trace left (the model, its records)."""
    graph = nx.MultiDiGraph(
        step_clocks=list(trace.step_clocks),
        decode_clocks=list(trace.decode_clocks),
        units=list(trace.units),
        nested_units=trace.nested_units,
        head_module=trace.head_module,
        managed=frozenset(trace.managed),
        last_clock=len(trace.events),
        storage_count=len(trace.storages),
    )
    graph.add_nodes_from(
        (
            storage_node(s.sid),
            {
                "nbytes": s.nbytes,
                "dtype": s.dtype,
                "shape": s.shape,
                "category": str(s.category),
                "owner": s.owner,
                "module": s.module,
                "phase": str(s.phase),
                "step": s.step,
                "op": s.op,
                "alloc_at": (0, 0, s.sid) if s.alloc_clock == BEFORE_TRACE else (s.alloc_clock, 0, 0),
                "free_at": None if s.free_clock is None else (s.free_clock, 0, 0),
                "unreferenced": s.unreferenced_clock,
            },
        )
        for s in trace.storages
    )
    graph.add_nodes_from(
        (
            op_node(op.index),
            {
                "name": op.name,
                "module": op.module,
                "phase": str(op.phase),
                "step": op.step,
                "clock_after": op.clock_after,
                "flops": op.flops,
            },
        )
        for op in trace.ops
    )
    edges: list[tuple[Any, Any, Any, dict[str, Any]]] = []
    for op in trace.ops:
        node = op_node(op.index)
        edges.extend((storage_node(sid), node, "read", {}) for sid in op.inputs)
        edges.extend((node, storage_node(sid), "produced", {}) for sid in op.outputs)
    for index, hold in enumerate(trace.holds):
        attrs = {
            "nbytes": hold.nbytes,
            "unit": hold.unit,
            "ops_before": hold.op,
            "pack_clock": hold.pack_clock,
            "unpack_clock": hold.unpack_clock,
            "release_clock": hold.release_clock,
        }
        edges.append((storage_node(hold.sid), op_node(_saving_op(trace, hold.op, hold.sid)), ("saved", index), attrs))
    graph.add_edges_from(edges)
    return graph


def _saving_op(trace: Trace, ops_before: int, sid: int) -> int:
    if ops_before == len(trace.ops) or (ops_before > 0 and sid in trace.ops[ops_before - 1].outputs):
        return ops_before - 1
    return ops_before


def storage_nodes(graph: nx.MultiDiGraph) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(sid, attributes)`` of every storage, in sid order (the node's own attribute dicts, listed once
    per graph in ``graph.graph`` as ``saved_edges`` are)."""
    listed = graph.graph.get("storage_attrs")
    if listed is None:
        nodes = graph.nodes
        listed = graph.graph["storage_attrs"] = [nodes[storage_node(sid)] for sid in range(graph.graph["storage_count"])]
    return enumerate(listed)


def saved_edges(graph: nx.MultiDiGraph) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(sid, op index, hold attributes)`` of every saved-for-backward edge, in the order saved.

    Every what-if reads them and a graph is not changed once built: they are found once per graph
    (a scan of all its edges) and kept in ``graph.graph``."""
    saved = graph.graph.get("saved_edges")
    if saved is None:
        found = [
            (key[1], sid, op, attrs)
            for (_, sid), (_, op), key, attrs in graph.edges(keys=True, data=True)
            if isinstance(key, tuple)
        ]
        saved = graph.graph["saved_edges"] = [(sid, op, attrs) for _, sid, op, attrs in sorted(found, key=lambda item: item[0])]
    yield from saved
