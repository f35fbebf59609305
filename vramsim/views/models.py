"""The bundled models (``vramsim models``): one section per family, each id with its published parameter count
and the ``--task`` values it takes, in columns sized to their contents so that it fits 80 columns."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from vramsim.model_zoo.entries import Entry

__all__ = ["parameters_cell", "render_models"]


def parameters_cell(parameters: int | str | None) -> str:
    """A published count in three figures ("8.03B", "124M"); a rounded one as published ("0.6B")."""
    if parameters is None or isinstance(parameters, str):
        return parameters or ""
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if parameters >= size * 0.9995:  # 999.9M is "1B", not "1e+03M"
            return f"{parameters / size:.3g}{unit}"
    return str(parameters)


def render_models(models: list[Entry], pipelines: list[tuple[Entry, str]], console: Console) -> None:
    """``models``: each with its family, parameters and tasks; ``pipelines``: each with its denoiser's parameters
    and the tasks it takes."""
    if models:
        console.print(Text("Bundled models by family: published parameters, --task values", style="bold"))
        _sections([(m.family, (m.model_id, parameters_cell(m.parameters), _TASKS[m.generates])) for m in models], console)
    if pipelines:
        console.print(Text("Diffusion pipelines by class: the denoiser's published parameters, --task values", style="bold"))
        _sections([(p.family, (p.model_id, parameters_cell(p.parameters), tasks)) for p, tasks in pipelines], console)


_TASKS = {True: "train, forward, generate", False: "train, forward"}


def _sections(rows: list[tuple[str, tuple[str, str, str]]], console: Console) -> None:
    """One heading per family, sorted, then its ids in columns as wide as their widest cell."""
    widths = [max(len(row[i]) for _, row in rows) for i in range(3)]
    families: dict[str, list[tuple[str, str, str]]] = {}
    for family, row in rows:
        families.setdefault(family, []).append(row)
    for family, members in sorted(families.items()):
        console.print(family, highlight=False)
        for model_id, parameters, tasks in members:
            cells = [model_id.ljust(widths[0]), *([parameters.rjust(widths[1])] if widths[1] else []), tasks]
            console.print("  " + "  ".join(cells), highlight=False, soft_wrap=True)
