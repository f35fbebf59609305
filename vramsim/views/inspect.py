"""An Inspection as the terminal shows it: the module tree (alike modules folded as the per-layer table folds
them), the largest temporaries, and what is live at the peak by the op and module that allocated it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.results.inspect import Inspection, ModuleNode
from vramsim.results.report import LayerRow
from vramsim.views.folding import fold_layers, without_peft_prefix
from vramsim.views.lines import print_wrapped
from vramsim.views.units import format_bytes

__all__ = ["PEAK_GROUPS_SHOWN", "render_inspection"]

PEAK_GROUPS_SHOWN = 10
"""How many of the peak's groups the terminal lists; the rest are summed on one line."""


def render_inspection(inspection: Inspection, console: Console, *, fold: bool = True) -> None:
    """What ``vramsim inspect`` prints; ``fold=False`` gives every module its own row."""
    at = inspection.peak_at
    module = without_peft_prefix(at.module)
    print_wrapped(console, Text.assemble((inspection.model, "bold"), f"  task={inspection.task} target={inspection.target}"))
    print_wrapped(
        console,
        Text.assemble(
            "Peak allocated: ",
            (format_bytes(inspection.peak_bytes), "bold"),
            f"  at step {at.step}, {at.phase}, {at.op}" + (f" in {module}" if module else ""),
        ),
    )
    _print(console, _tree_table(inspection, fold=fold))
    _print(console, _temporaries_table(inspection))
    _print(console, _peak_table(inspection))


def _print(console: Console, table: Table) -> None:
    """A table with its title and caption as wrapped lines (rich would pad them to the table's width)."""
    title, caption = table.title, table.caption
    table.title = table.caption = None
    print_wrapped(console, str(title))
    console.print(table)
    for line in str(caption or "").splitlines():
        print_wrapped(console, line)


def _as_row(node: ModuleNode) -> LayerRow:
    return LayerRow(
        module=node.path,
        parameters=node.parameters,
        parameter_bytes=node.parameter_bytes,
        activation_bytes=node.saved_bytes,
        peak_bytes=node.peak_bytes,
    )


def _tree_table(inspection: Inspection, *, fold: bool) -> Table:
    """One row per module (a run of alike siblings folded into one, figures per module), indented by depth."""
    saved = "saved\nactivations" if inspection.training else "held at\nthe peak"
    table = Table(title="Modules (steady-state step)", title_justify="left")
    table.add_column("module", overflow="fold")
    for header in ("parameters", "param\nbytes", saved, "peak while\nrunning"):
        table.add_column(header, justify="right", no_wrap=True)
    notes: list[str] = []
    rows = _rows([inspection.tree], 0, fold=fold)
    for name, group, indent in rows:
        first = group[0]
        least, most = min(n.saved_bytes for n in group), max(n.saved_bytes for n in group)
        peak = max(n.peak_bytes for n in group)
        table.add_row(
            " " * indent + name,
            f"{first.parameters:,}",
            format_bytes(first.parameter_bytes),
            format_bytes(most) if format_bytes(least) == format_bytes(most) else f"\u2264{format_bytes(most)}",
            format_bytes(peak) if peak else "-",
        )
        if first.shared_parameters and first.path:
            notes.append(f"{name.strip()}: also uses {first.shared_parameters:,} parameters counted at another module (tied)")
    if any(len(group) > 1 for _, group, _ in rows):
        notes.append("xN: N alike modules, figures per module; \u2264: they differ, the most one holds")
    table.caption = "\n".join(notes) or None
    return table


def _rows(nodes: list[ModuleNode], indent: int, *, fold: bool) -> list[tuple[str, list[ModuleNode], int]]:
    """``(name, alike nodes, indent)`` per displayed row, depth first; siblings folded as ``fold_layers`` folds
    the per-layer table, and a folded run's children folded position by position."""
    rows: list[tuple[str, list[ModuleNode], int]] = []
    start = 0
    for run in fold_layers([_as_row(node) for node in nodes], fold=fold):
        group = nodes[start : start + run.count]
        start += run.count
        rows.extend(_group_rows(group, indent, fold=fold))
    return rows


def _group_rows(group: list[ModuleNode], indent: int, *, fold: bool) -> list[tuple[str, list[ModuleNode], int]]:
    """A run of alike nodes as one row, then their children: position by position where every node has the same."""
    rows = [(_name(group), group, indent)]
    widths = {len(node.children) for node in group}
    if len(group) == 1:
        return rows + _rows(list(group[0].children), indent + 2, fold=fold)
    if len(widths) != 1:  # not alike below: each child of each node shown
        return rows + [row for node in group for row in _rows(list(node.children), indent + 2, fold=fold)]
    for position in zip(*(node.children for node in group), strict=True):
        rows.extend(_group_rows(list(position), indent + 2, fold=fold))
    return rows


def _name(group: list[ModuleNode]) -> str:
    """A module's own name (its path's last part; the model's class for the model), or ``first-last xN``."""
    first = group[0]
    if not first.path:
        return f"({first.kind})"
    own = first.path.rpartition(".")[2]
    last = group[-1].path.rpartition(".")[2]
    return own if len(group) == 1 or own == last else f"{own}-{last} x{len(group)}"


def _temporaries_table(inspection: Inspection) -> Table:
    table = Table(title="Largest temporaries (last step; lifetime in events)", title_justify="left")
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("lifetime", justify="right", no_wrap=True)
    table.add_column("op in module, phase: shape dtype", overflow="fold")
    for temp in inspection.temporaries:
        where = f" in {without_peft_prefix(temp.module)}" if temp.module else ""
        shape = "x".join(map(str, temp.shape)) or "scalar"
        lifetime = "never freed" if temp.lifetime_events is None else f"{temp.lifetime_events:,}"
        table.add_row(format_bytes(temp.nbytes), lifetime, f"{temp.op}{where}, {temp.phase}: {shape} {temp.dtype}")
    return table


def _peak_table(inspection: Inspection) -> Table:
    peak = max(inspection.peak_bytes, 1)
    table = Table(title="At the peak: what is live, by the op and module that allocated it", title_justify="left")
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    table.add_column("role: op in module (storages)", overflow="fold")
    for group in inspection.at_peak[:PEAK_GROUPS_SHOWN]:
        where = f" in {without_peft_prefix(group.module)}" if group.module else ""
        table.add_row(
            format_bytes(group.nbytes), f"{group.nbytes / peak:.1%}", f"{group.category}: {group.op}{where} ({group.storages:,})"
        )
    rest = inspection.at_peak[PEAK_GROUPS_SHOWN:]
    if rest:
        nbytes = sum(group.nbytes for group in rest)
        table.add_row(format_bytes(nbytes), f"{nbytes / peak:.1%}", f"{len(rest):,} more groups")
    if inspection.overhead_bytes:
        table.add_row(format_bytes(inspection.overhead_bytes), f"{inspection.overhead_bytes / peak:.1%}", "overheads")
    return table
