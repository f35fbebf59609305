"""What ``vramsim inspect`` finds in one trace: the module tree with each module's memory, the largest
temporaries, what is live at the peak, and (when asked for) the op/storage graph to export."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from vramsim.results.report import PeakSite

__all__ = ["GRAPH_FORMATS", "GraphEdge", "GraphNode", "Inspection", "ModuleNode", "OpGraph", "PeakGroup", "Temporary"]

GRAPH_FORMATS = (".graphml", ".dot")
"""The file suffixes ``--graph`` writes: GraphML (``networkx.read_graphml``) and Graphviz dot (pydot)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleNode:
    """One module of the tree, its figures over the steady-state (last) step, its whole subtree included."""

    path: str
    """As the trace names it (``transformer.h.0``); "" for the model itself."""
    kind: str
    """The module's class name (``GPT2Block``)."""
    parameters: int
    """Parameters of the subtree, each counted once at the first module that names it (a tied weight at the
    first of its modules), so a module's children and its own add up to it."""
    shared_parameters: int
    """Parameters the subtree uses that are counted at a module outside it (a tied output head's weight)."""
    parameter_bytes: int
    """Bytes of the subtree's weight storages in the trace, attributed as ``parameters`` are."""
    saved_bytes: int
    """Training: activations allocated in the subtree that autograd saved for backward; inference: what the
    subtree allocated in the step that is live at the peak (its KV cache, the hidden states it handed on)."""
    peak_bytes: int
    """The most allocated at one of the subtree's allocations (its own peak while it ran); 0 if it allocated
    nothing."""
    children: tuple[ModuleNode, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Temporary:
    """One temporary storage of the last step: made and dropped inside a phase."""

    op: str
    module: str
    phase: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    alloc_event: int
    """The event clock of its allocation."""
    lifetime_events: int | None
    """Events from its allocation to its free; ``None`` if it is never freed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PeakGroup:
    """What is live at the peak, grouped by the op and module that allocated it and its role."""

    op: str
    """The op that allocated it (``<pre-existing>`` for weights and buffers that existed before the step)."""
    module: str
    category: str
    nbytes: int
    """In the device's units (rounded blocks on a GPU), as the peak counts them."""
    storages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphNode:
    """One node of the op/storage graph (``tracer/graph.py``), its attributes scalars or ``None``."""

    id: str
    """``op_<index>`` or ``storage_<sid>``."""
    kind: str
    """``op`` or ``storage``."""
    op: str
    """The op itself, or for a storage the op that allocated it."""
    module: str
    phase: str
    step: int
    nbytes: int
    """A storage's bytes; for an op, the bytes of the storages it allocated."""
    shape: tuple[int, ...] | None = None
    """A storage's (its first tensor's) shape."""
    dtype: str | None = None
    category: str | None = None
    """A storage's role (``tracer/categories.py``)."""
    alloc_event: int
    """A storage's allocation clock (0: before the trace began); for an op, the clock right after it ran."""
    free_event: int | None = None
    """A storage's free clock; ``None`` if it is never freed (and for an op)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphEdge:
    """One edge: an op ``produced`` a storage, ``read`` it, or its backward ``saved`` it."""

    source: str
    target: str
    kind: str
    nbytes: int | None = None
    """For ``saved``: the saved tensor's own bytes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpGraph:
    """The traced program's op/storage graph as plain data, for export."""

    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Inspection:
    """One workload's memory by module, read from its one trace."""

    model: str
    target: str
    task: str
    training: bool
    """Whether ``ModuleNode.saved_bytes`` are saved activations (training) or what is held at the peak (inference)."""
    depth: int | None
    """The tree's depth as asked; ``None``: down to the repeated block (the per-layer table's rows)."""
    peak_bytes: int
    """The report's ``peak_bytes``: the steady-state peak of allocated bytes."""
    peak_at: PeakSite
    tree: ModuleNode
    temporaries: list[Temporary]
    """The largest temporaries of the last step, largest first."""
    at_peak: list[PeakGroup]
    """Everything live at the peak, largest group first; with ``overhead_bytes`` it sums to ``peak_bytes``."""
    overhead_bytes: int
    """Allocated overheads live at the peak (the cuBLAS workspace), which no op allocated."""
    graph: OpGraph | None = None
    """The op/storage graph when asked for (``graph=True``); left out of ``to_dict``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``--json`` prints exactly this); the graph is exported with ``--graph`` instead."""
        data = asdict(replace(self, graph=None))
        del data["graph"]
        return data

    def __repr__(self) -> str:
        return f"<Inspection {self.model} peak={self.peak_bytes / 2**30:.2f} GiB target={self.target}>"
