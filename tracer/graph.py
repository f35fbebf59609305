"""The trace as a networkx graph: op nodes and storage nodes, joined by reads and writes."""

from __future__ import annotations

import networkx as nx

from .records import Trace

__all__ = ["build_graph", "op_node", "storage_node"]


def op_node(index: int) -> tuple[str, int]:
    return ("op", index)


def storage_node(sid: int) -> tuple[str, int]:
    return ("storage", sid)


def build_graph(trace: Trace) -> nx.DiGraph:
    """One node per op and per storage; ``storage -> op`` when the op reads it, ``op -> storage``
    when the op allocated it.

    Storage nodes carry ``nbytes``, ``alloc_clock``, ``free_clock`` (``None`` = never freed) and
    ``category``; op nodes carry ``clock_after``, ``name``, ``module``, ``phase`` and ``step``.
    What-if estimators rewrite these attributes on a copy and run the liveness again.
    """
    graph = nx.DiGraph()
    graph.add_nodes_from(
        (
            storage_node(s.sid),
            {
                "nbytes": s.nbytes,
                "alloc_clock": s.alloc_clock,
                "free_clock": s.free_clock,
                "category": s.category,
                "module": s.module,
                "phase": s.phase,
            },
        )
        for s in trace.storages
    )
    graph.add_nodes_from(
        (
            op_node(op.index),
            {"clock_after": op.clock_after, "name": op.name, "module": op.module, "phase": op.phase, "step": op.step},
        )
        for op in trace.ops
    )
    for op in trace.ops:
        node = op_node(op.index)
        graph.add_edges_from((storage_node(sid), node) for sid in op.inputs)
        graph.add_edges_from((node, storage_node(sid)) for sid in op.outputs)
    graph.graph["last_clock"] = len(trace.events)
    return graph
