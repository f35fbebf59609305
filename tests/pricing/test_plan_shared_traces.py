"""A plan's searches share their traces across GPUs alike but for their memory: a trace is the same program on both
(the premise, checked on the graphs), each program is traced once for all of them, and the plan's rows are those of
each offer planned alone."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import networkx as nx
import pytest
from cli_runs import SearchedProgram, searched_programs
from tiny_models import tiny_llama_config

from vramsim.analysis.traced import build_and_trace
from vramsim.api import plan
from vramsim.config import SimulationConfig
from vramsim.pricing import parse_sheet
from vramsim.results.plan import PlanRow
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

JOB = {"task": "train", "seq_len": 64}

HEAD = 'currency = "USD"\n'

OFFERS = {
    "h100-pair": ("h100-sxm", "2.00"),
    "h200-pair": ("h200", "3.00"),
    "a100-pair": ("a100-80gb", "1.00"),
}
"""Two GPUs a node and a node each: 1 and 2 GPUs weighed, the second a tensor-parallel program's trace."""


def _offer(name: str) -> str:
    gpu, price = OFFERS[name]
    return (
        f'[[offer]]\nname = "{name}"\nprovider = "Cloud"\ngpu = "{gpu}"\ngpus_per_node = 2\nnodes = 1\n'
        f'interconnect = "nvlink"\nprice = {{ day = {price} }}\n'
    )


def _sheet(*names: str) -> Any:
    import tomllib

    text = HEAD + "".join(_offer(name) for name in names)
    return parse_sheet(tomllib.loads(text, parse_float=Decimal), "sheet.toml")


def _planned(*names: str) -> tuple[list[PlanRow], list[SearchedProgram], int]:
    """The plan's rows over the offers ``names``, every program the searches traced (GPU and degrees), and the
    count the plan reports."""
    with pytest.MonkeyPatch.context() as patch:
        traced = searched_programs(patch)
        found = plan(tiny_llama_config(), prices=_sheet(*names), days=1, **JOB)
    return found.rows, traced, found.traces


def _unkeyed(row: PlanRow) -> PlanRow:
    """The row without its order key (a digest of the whole request, the sheet's other offers included)."""
    return dataclasses.replace(row, quote=dataclasses.replace(row.quote, key=""))


def test_a_trace_reads_nothing_of_the_gpus_memory() -> None:
    """H100 SXM and H200 differ only in their names and memory: every rank program's graph is the same on both
    (so one trace answers both); the A100 runs other kernels (sm 8.0), so it is not taken for them."""
    h100, h200, a100 = (resolve_target(name) for name in ("h100-sxm", "h200", "a100-80gb"))
    assert h100.traced_alike == h200.traced_alike != a100.traced_alike
    assert h100.profile.memory_bytes != h200.profile.memory_bytes
    for tp in (1, 2):
        graphs = []
        for target in (h100, h200):
            config = SimulationConfig(**JOB, device=target.name, gpus=tp, tp=tp)
            _, _, trace = build_and_trace(tiny_llama_config(), config, target, checkpointing="marked")
            graphs.append(build_graph(trace))
        assert nx.utils.graphs_equal(*graphs)
        assert graphs[0].graph == graphs[1].graph


def test_each_program_is_traced_once_for_gpus_alike_and_the_rows_are_each_offers_alone() -> None:
    together, traced, count = _planned(*OFFERS)
    # the H200 traced nothing: the H100's traces serve it; the A100 traced its own
    assert sorted(traced) == sorted(SearchedProgram(gpu, tp, 1, 1) for gpu in ("h100-sxm", "a100-80gb") for tp in (1, 2))
    assert count == len(traced)
    alone = [row for name in OFFERS for row in _planned(name)[0]]
    assert {(r.quote.offer, r.quote.gpus) for r in together} == {(o, g) for o in OFFERS for g in (1, 2)}
    key = {(r.quote.offer, r.quote.gpus): _unkeyed(r) for r in alone}
    assert [_unkeyed(r) for r in together] == [key[r.quote.offer, r.quote.gpus] for r in together]
    h200 = {r.quote.gpus: r for r in together if r.quote.offer == "h200-pair"}
    assert h200[1].usable_bytes > key["h100-pair", 1].usable_bytes  # measured on the H200's own memory
