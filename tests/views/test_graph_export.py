"""The op/storage graph written by ``vramsim.write_graph`` reads back whole: GraphML through networkx, dot through pydot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import pydot
import pytest
import torch

import vramsim
from vramsim.views.graph_export import export_graph

MODEL = """
import torch

def build():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
"""


@pytest.fixture(scope="module")
def inspection(tmp_path_factory: pytest.TempPathFactory) -> vramsim.Inspection:
    folder = tmp_path_factory.mktemp("model")
    (folder / "model.py").write_text(MODEL)
    return vramsim.inspect(
        f"{folder}/model.py:build",
        graph=True,
        inputs=lambda batch, _: {"input": torch.randn(batch, 8)},
        loss=lambda out: out.sum(),
        batch_size=4,
        device="cpu",
        dtype="fp32",
    )


def _edges(graph: nx.MultiDiGraph) -> list[tuple[str, str, dict[str, Any]]]:
    return sorted(((s, t, a) for s, t, a in graph.edges(data=True)), key=lambda edge: (edge[0], edge[1], sorted(edge[2].items())))


def test_graphml_round_trips(inspection: vramsim.Inspection, tmp_path: Path) -> None:
    """Same nodes, edges and attributes back from ``networkx.read_graphml`` (ints as ints, a shape as its list)."""
    assert inspection.graph is not None
    path = vramsim.write_graph(inspection.graph, tmp_path / "graph.graphml")
    read = nx.read_graphml(path)
    written = export_graph(inspection.graph)
    assert read.is_directed() and read.is_multigraph()
    assert (read.number_of_nodes(), read.number_of_edges()) == (len(inspection.graph.nodes), len(inspection.graph.edges))
    assert dict(read.nodes(data=True)) == dict(written.nodes(data=True))
    assert _edges(read) == _edges(written)
    saved = [attrs for _, _, attrs in read.edges(data=True) if attrs["kind"] == "saved"]
    assert saved and all(attrs["nbytes"] > 0 for attrs in saved)
    first_linear = next(n for n in inspection.graph.nodes if n.kind == "storage" and n.op == "aten.addmm")
    assert read.nodes[first_linear.id]["shape"] == "[4, 16]" and read.nodes[first_linear.id]["module"] == "0"
    assert read.nodes[first_linear.id]["lifetime_events"] == first_linear.free_event - first_linear.alloc_event  # type: ignore[operator]


def test_dot_reads_back_with_pydot(inspection: vramsim.Inspection, tmp_path: Path) -> None:
    """The dot file parses with pydot, and networkx's reader gives every node and edge with its attributes (as
    dot's strings, quotes kept where dot needs them)."""
    assert inspection.graph is not None
    path = vramsim.write_graph(inspection.graph, tmp_path / "graph.dot")
    (parsed,) = pydot.graph_from_dot_file(str(path))
    assert len(parsed.get_edges()) == len(inspection.graph.edges)
    read = nx.drawing.nx_pydot.read_dot(path)
    assert (read.number_of_nodes(), read.number_of_edges()) == (len(inspection.graph.nodes), len(inspection.graph.edges))
    written = export_graph(inspection.graph)
    for node, attrs in written.nodes(data=True):
        assert {name: value.strip('"') for name, value in read.nodes[node].items()} == {n: str(v) for n, v in attrs.items()}


def test_an_unknown_suffix_is_refused(inspection: vramsim.Inspection, tmp_path: Path) -> None:
    assert inspection.graph is not None
    with pytest.raises(vramsim.ConfigError, match=r"ending in \.graphml or \.dot"):
        vramsim.write_graph(inspection.graph, tmp_path / "graph.gexf")
    assert not (tmp_path / "graph.gexf").exists()
