"""One trace read by module: the tree with each module's memory, the largest temporaries, what is live at the peak.

Every figure reads the trace the report reads: parameters from the traced modules and the trace's weight storages,
saved activations and each module's peak from the timeline and its replay (as the per-layer table's), temporaries
and the peak's groups from the same timeline at the same peak event.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import networkx as nx
import torch

from vramsim.analysis.summary import count_parameters, steady_peak
from vramsim.analysis.traced import Traced, trace_workload
from vramsim.analysis.whatifs import Analysis, Outcome
from vramsim.config import SimulationConfig
from vramsim.config.choices import parse_loss
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing_plan import CheckpointPlan, parse_checkpointing
from vramsim.estimators.timeline import Timeline
from vramsim.results.inspect import GraphEdge, GraphNode, Inspection, ModuleNode, OpGraph, PeakGroup, Temporary
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.attention import check_attention
from vramsim.workload.losses import check_loss_target
from vramsim.workload.models import ModelSource, model_name
from vramsim.workload.optimizers import check_target
from vramsim.workload.quantization.weights import logical_numel
from vramsim.workload.targets import resolve_target

__all__ = ["TEMPORARIES_LISTED", "inspect_model"]

TEMPORARIES_LISTED = 10
"""How many of the largest temporaries an inspection lists."""


def inspect_model(model: ModelSource, *, depth: int | None = None, graph: bool = False, **options: Any) -> Inspection:
    """Trace ``model`` once and read it by module (``vramsim.inspect`` documents the arguments)."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ConfigError(f"depth must be a whole number, 0 or more (0: the model alone), not {depth!r}")
    config = SimulationConfig.from_options(**options)
    if config.device_map is not None:
        raise UnsupportedError("inspect reads one device's trace; a device map places the model on several: use trace")
    target = resolve_target(config.device)
    check_attention(config.attn_implementation, target.profile)
    check_loss_target(parse_loss(config.loss) if isinstance(config.loss, str) else None, target.profile)
    check_target(config.optimizer, target.profile.vendor)
    traced = trace_workload(model, config, target, derive=False)
    plan = parse_checkpointing(config.checkpointing)
    outcome = Analysis(traced.graph, target, config).run(CheckpointPlan("none") if plan.kind == "all" else plan)
    training = config.task == "train"
    steady = steady_peak(outcome.timeline, outcome.memory)
    at_peak, overhead = _at_peak(outcome)
    return Inspection(
        model=model_name(model),
        target=target.name,
        task=config.task,
        training=training,
        depth=depth,
        peak_bytes=steady.peak_bytes,
        peak_at=steady.site,
        tree=_tree(traced, outcome, depth, training=training),
        temporaries=_temporaries(traced, outcome.timeline),
        at_peak=at_peak,
        overhead_bytes=overhead,
        graph=_op_graph(traced.graph) if graph else None,
    )


def _ancestors(path: str) -> Iterator[str]:
    """``a.b.c`` -> ``""``, ``a``, ``a.b``, ``a.b.c``: every module a path lies in, the model included."""
    yield ""
    parts = path.split(".") if path else []
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


def _tree(traced: Traced, outcome: Outcome, depth: int | None, *, training: bool) -> ModuleNode:
    """The module tree to ``depth`` (or down to the per-layer table's rows), each node's figures its subtree's."""
    modules = traced.program.modules
    counted: dict[str, int] = defaultdict(int)
    for name, module in modules.items():
        for param_name, param in module.named_parameters():  # a tied weight once, at its first name
            for path in _ancestors(f"{name}.{param_name}" if name else param_name):
                counted[path] += logical_numel(param)
    weight_bytes: dict[str, int] = defaultdict(int)
    for record in traced.trace.storages:
        if record.category == Category.PARAMETER:
            for path in _ancestors(record.owner):
                weight_bytes[path] += record.nbytes
    saved, peaks = _module_figures(outcome, training=training)
    rows = {spec.module for spec in traced.specs}
    shown = {path for row in rows for path in _ancestors(row)}

    def node(path: str, module: torch.nn.Module | None, children: list[tuple[str, torch.nn.Module]]) -> ModuleNode:
        level = len(path.split(".")) if path else 0
        kept = [
            node(child_path, child, _named_children(child, child_path))
            for child_path, child in children
            if (level < depth if depth is not None else child_path in shown)
        ]
        used = count_parameters(module) if module is not None else count_parameters(*modules.values())
        return ModuleNode(
            path=path,
            kind=type(module).__name__ if module is not None else traced.program.name,
            parameters=counted[path],
            shared_parameters=used - counted[path],
            parameter_bytes=weight_bytes[path],
            saved_bytes=saved[path],
            peak_bytes=peaks[path],
            children=tuple(kept),
        )

    if list(modules) == [""]:
        return node("", modules[""], _named_children(modules[""], ""))
    return node("", None, list(modules.items()))  # a pipeline: its components are the model's children


def _named_children(module: torch.nn.Module, path: str) -> list[tuple[str, torch.nn.Module]]:
    return [(f"{path}.{name}" if path else name, child) for name, child in module.named_children()]


def _module_figures(outcome: Outcome, *, training: bool) -> tuple[dict[str, int], dict[str, int]]:
    """By module path, over the last step: bytes saved for backward (training) or, in inference, allocated in the
    step and live at the peak; and the most allocated at one of its allocations; each a subtree's."""
    timeline, memory = outcome.timeline, outcome.memory
    last = len(timeline.steps) - 1
    first, end = timeline.steps[-1]
    own_peak: dict[str, int] = defaultdict(int)
    for index in range(first, end + 1):
        key, is_alloc = timeline.events[index]
        if is_alloc:
            module = timeline.blocks[key].module
            own_peak[module] = max(own_peak[module], memory.live.allocated[index])
    if training:
        held = [b for b in timeline.blocks if b.category == Category.ACTIVATION and b.phase == Phase.FORWARD]
    else:
        held = [timeline.blocks[key] for key in _live_at(timeline, memory.peak_index)]
    saved: dict[str, int] = defaultdict(int)
    for block in held:
        if block.step == last:
            for path in _ancestors(block.module):
                saved[path] += block.nbytes
    peaks: dict[str, int] = defaultdict(int)
    for module, peak in own_peak.items():
        for path in _ancestors(module):
            peaks[path] = max(peaks[path], peak)
    return saved, peaks


def _live_at(timeline: Timeline, index: int) -> list[int]:
    """The keys of the blocks live right after event ``index``, in the order they were allocated."""
    live: dict[int, None] = {}
    for key, is_alloc in timeline.events[: index + 1]:
        if is_alloc:
            live[key] = None
        else:
            del live[key]
    return list(live)


def _temporaries(traced: Traced, timeline: Timeline) -> list[Temporary]:
    """The largest temporaries of the last step, with the shape and dtype their storage was traced with."""
    last = len(timeline.steps) - 1
    storages = traced.trace.storages
    found = [
        (block, storages[key if block.copy_of is None else block.copy_of])
        for key, block in enumerate(timeline.blocks)
        if block.step == last and block.category == Category.TEMPORARY and (key < len(storages) or block.copy_of is not None)
    ]
    found.sort(key=lambda pair: pair[0].nbytes, reverse=True)
    return [
        Temporary(
            op=block.op,
            module=block.module,
            phase=block.phase,
            shape=record.shape,
            dtype=record.dtype,
            nbytes=block.nbytes,
            alloc_event=block.alloc_at[0],
            lifetime_events=None if block.free_at is None else block.free_at[0] - block.alloc_at[0],
        )
        for block, record in found[:TEMPORARIES_LISTED]
    ]


def _at_peak(outcome: Outcome) -> tuple[list[PeakGroup], int]:
    """What is live at the peak event, grouped by allocating op, module and role, in the device's units; and the
    allocated overheads then (groups and overheads sum to the peak)."""
    timeline, memory = outcome.timeline, outcome.memory
    live = _live_at(timeline, memory.peak_index)
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for key in live:
        block = timeline.blocks[key]
        group = groups[(block.op, block.module, block.category)]
        group[0] += memory.live.sizes[key]
        group[1] += 1
    listed = [
        PeakGroup(op=op, module=module, category=category, nbytes=nbytes, storages=count)
        for (op, module, category), (nbytes, count) in groups.items()
    ]
    listed.sort(key=lambda group: group.nbytes, reverse=True)
    overhead = memory.live.overhead_bytes if memory.peak_index >= timeline.preexisting else 0
    return listed, overhead


def _op_graph(graph: nx.MultiDiGraph) -> OpGraph:
    """The traced graph's nodes and edges as plain records, named ``op_<index>`` and ``storage_<sid>``."""
    nodes: list[GraphNode] = []
    for (kind, index), attrs in graph.nodes(data=True):
        if kind == "storage":
            free = attrs["free_at"]
            nodes.append(
                GraphNode(
                    id=f"storage_{index}",
                    kind="storage",
                    op=attrs["op"],
                    module=attrs["module"],
                    phase=attrs["phase"],
                    step=attrs["step"],
                    nbytes=attrs["nbytes"],
                    shape=tuple(attrs["shape"]),
                    dtype=attrs["dtype"],
                    category=attrs["category"],
                    alloc_event=attrs["alloc_at"][0],
                    free_event=None if free is None else free[0],
                )
            )
        else:
            made = sum(graph.nodes[target]["nbytes"] for _, target in graph.out_edges((kind, index)))
            nodes.append(
                GraphNode(
                    id=f"op_{index}",
                    kind="op",
                    op=attrs["name"],
                    module=attrs["module"],
                    phase=attrs["phase"],
                    step=attrs["step"],
                    nbytes=made,
                    alloc_event=attrs["clock_after"],
                )
            )
    edges = [
        GraphEdge(
            source=f"{source[0]}_{source[1]}",
            target=f"{target[0]}_{target[1]}",
            kind=key[0] if isinstance(key, tuple) else key,
            nbytes=attrs.get("nbytes"),
        )
        for source, target, key, attrs in graph.edges(keys=True, data=True)
    ]
    return OpGraph(nodes=tuple(nodes), edges=tuple(edges))
