"""The op/storage graph written as a file: GraphML (``networkx.read_graphml`` reads it) or Graphviz dot (through
networkx's pydot writer). Both need scalar attributes: a shape is written as its list (``[1, 16, 768]``), and an
attribute with no value (an op's dtype, a storage never freed) is left out."""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from vramsim.errors import ConfigError
from vramsim.results.inspect import GRAPH_FORMATS, OpGraph

__all__ = ["export_graph", "graph_format", "write_graph"]


def graph_format(path: str | Path) -> str:
    """The file's suffix if ``write_graph`` writes it; a ConfigError naming the suffixes otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in GRAPH_FORMATS:
        raise ConfigError(f"cannot write a graph to {str(path)!r}: name a file ending in {' or '.join(GRAPH_FORMATS)}")
    return suffix


def export_graph(graph: OpGraph) -> nx.MultiDiGraph:
    """The graph as networkx holds it for writing: nodes by id, each attribute a str or an int."""
    exported = nx.MultiDiGraph()
    for node in graph.nodes:
        attrs = {
            "kind": node.kind,
            "op": node.op,
            "module": node.module,
            "phase": node.phase,
            "step": node.step,
            "nbytes": node.nbytes,
            "shape": None if node.shape is None else str(list(node.shape)),
            "dtype": node.dtype,
            "category": node.category,
            "alloc_event": node.alloc_event,
            "free_event": node.free_event,
            "lifetime_events": None if node.free_event is None else node.free_event - node.alloc_event,
        }
        exported.add_node(node.id, **{name: value for name, value in attrs.items() if value is not None})
    for edge in graph.edges:
        extra = {} if edge.nbytes is None else {"nbytes": edge.nbytes}
        exported.add_edge(edge.source, edge.target, kind=edge.kind, **extra)
    return exported


def write_graph(graph: OpGraph, path: str | Path) -> Path:
    """Write ``graph`` to ``path``, GraphML or dot by its suffix; returns the path written."""
    suffix = graph_format(path)
    exported = export_graph(graph)
    if suffix == ".graphml":
        nx.write_graphml(exported, path)
    else:
        nx.drawing.nx_pydot.write_dot(_html_quoted(exported), path)
    return Path(path)


def _html_quoted(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """dot reads ``<...>`` as an HTML string (pydot writes it unquoted): ``<pre-existing>`` is quoted to stay text."""
    for _, attrs in graph.nodes(data=True):
        for name, value in attrs.items():
            if isinstance(value, str) and value.startswith("<"):
                attrs[name] = f'"{value}"'
    return graph
