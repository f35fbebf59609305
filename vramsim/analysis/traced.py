"""Build a workload on meta and trace it for a target: the one trace every figure of a report reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import networkx as nx

from vramsim.analysis import generation
from vramsim.analysis.summary import LayerSpec, layer_specs
from vramsim.config import SimulationConfig
from vramsim.errors import TraceError
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import Trace
from vramsim.workload.attention import attention_stand_in
from vramsim.workload.build import build_program
from vramsim.workload.models import ModelSource
from vramsim.workload.program import Program
from vramsim.workload.quantization.weights import quantized_kernels_on_meta
from vramsim.workload.targets import Target
from vramsim.workload.tracing import trace_program

__all__ = ["Traced", "build_and_trace", "trace_workload"]


@dataclass(frozen=True, slots=True)
class Traced:
    """One workload traced once: every variant of ``simulate_each`` reads the same."""

    program: Program
    specs: list[LayerSpec]
    """The per-layer table's modules, read from the program before it ran."""
    trace: Trace
    graph: nx.MultiDiGraph
    derived: generation.Generation | None
    """A long generation derived from two short traces (``analysis/generation.py``), else None."""


def trace_workload(model: ModelSource, config: SimulationConfig, target: Target, *, derive: bool) -> Traced:
    """Trace the workload; with ``derive`` (a long generation, on one rank in every variant), as two short
    runs it is derived from (``vramsim/analysis/generation.py``), unless they cannot give it, and then whole."""
    if derive:
        program, specs, trace = build_and_trace(model, generation.head_config(config), target, checkpointing="marked")
        graph = build_graph(trace)
        try:
            probe_config, prepare = generation.tail_probe(config, program.batch)
            _, _, probe = build_and_trace(model, probe_config, target, checkpointing="marked", prepare=prepare)
            derived = generation.derive(graph, build_graph(probe), config.max_new_tokens or 0)
            return Traced(program, specs, trace, graph, derived)
        except (ValueError, TraceError):  # no probe, or steps unalike: the whole trace says what runs
            pass
    program, specs, trace = build_and_trace(model, config, target, checkpointing="marked")
    return Traced(program, specs, trace, build_graph(trace), None)


def build_and_trace(
    model: ModelSource,
    config: SimulationConfig,
    target: Target,
    *,
    checkpointing: Literal["marked", "applied"],
    prepare: Callable[[Program], None] | None = None,
) -> tuple[Program, list[LayerSpec], Trace]:
    """Build the workload on meta and trace it for ``target``. ``simulate`` traces it with the
    checkpointable blocks marked and computes every checkpointing choice from the graph; a
    re-trace with the choice ``applied`` for real is how the tests check that computation.
    ``prepare`` changes the built program before it is traced (a generation's tail probe)."""
    with (
        target.emulation(config.torch_autograd) as emulation,
        attention_stand_in(config.attn_implementation, emulation),
        quantized_kernels_on_meta(config.quantization, config.device),
    ):
        program = build_program(
            model, config, device="meta", emulation=emulation, foreach=target.foreach, checkpointing=checkpointing
        )
        if prepare is not None:
            prepare(program)
        specs = layer_specs(program.modules)
        trace = trace_program(
            program, devices=target.counted_devices, workspaces=target.rules.workspaces, moe_routing=config.moe_routing
        )
    return program, specs, trace
