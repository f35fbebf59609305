"""The house: no import circle among vramsim's modules, no module taking another's private name."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).parents[1]
PACKAGES = {
    "vramsim": "vramsim",
    "tracer": "vramsim.tracer",
    "estimators": "vramsim.estimators",
    "model_zoo": "vramsim.model_zoo",
}
"""Each source folder and the package it installs as (pyproject's package-dir)."""


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            modules[".".join([package, *parts]).removesuffix(".__init__")] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(module imported, name taken from it) for every import in the file, at any depth (lazy ones too)."""
    found = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.append((child, "") if child in modules else (base, alias.name))
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return [(module, taken) for module, taken in found if module in modules and module != name]


def _graph() -> tuple[nx.DiGraph, dict[tuple[str, str], set[str]]]:
    modules = _modules()
    graph, taken = nx.DiGraph(), {}
    for name, path in modules.items():
        graph.add_node(name)
        if name == "vramsim":  # the public face imports its names lazily, from every layer
            continue
        for module, what in _imports(name, path, modules):
            graph.add_edge(name, module)
            taken.setdefault((name, module), set()).add(what)
    return graph, taken


def test_no_import_circle() -> None:
    graph, _ = _graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, circles


def test_no_module_takes_another_modules_private_name() -> None:
    _, taken = _graph()
    private = {(a, b): sorted(n for n in names if n.startswith("_")) for (a, b), names in taken.items()}
    assert not {pair: names for pair, names in private.items() if names}
