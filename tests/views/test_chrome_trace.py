"""The ``--chrome-trace`` file: JSON Perfetto and chrome://tracing load, ops as slices inside their modules, memory counters."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from tiny_models import tiny_llama_config

import vramsim
from vramsim.views.chrome_trace import write_chrome_trace


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[vramsim.Report, list[dict[str, Any]]]:
    """A two-layer Llama's training step on an H100, with full activation checkpointing (recomputed blocks)."""
    config = tiny_llama_config()
    report = vramsim.simulate(
        config, task="train", device="h100-sxm", batch_size=2, seq_len=64, checkpointing="full", memory_history=True
    )
    assert report.memory_history is not None
    path = write_chrome_trace(report.memory_history, tmp_path_factory.mktemp("trace") / "trace.json")
    return report, json.loads(path.read_text())["traceEvents"]


def test_the_trace_holds_slices_counters_memory_instants_and_names(exported: tuple[vramsim.Report, list[dict[str, Any]]]) -> None:
    report, events = exported
    kinds = Counter(event["ph"] for event in events)
    assert set(kinds) == {"M", "X", "C", "i"}
    history = report.memory_history
    assert history is not None
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "cpu_op"]
    assert [e["name"] for e in ops] == [op.name for op in history.ops]
    assert all(e["dur"] == 1 for e in ops)  # one tick per op
    holds = [a for a in history.actions if a.action in ("alloc", "free_completed")]
    assert kinds["i"] == len(holds)


def test_each_op_sits_inside_a_slice_of_its_module(exported: tuple[vramsim.Report, list[dict[str, Any]]]) -> None:
    """Module slices nest as the module tree does, and each op's module has a slice around the op."""
    _, events = exported
    modules = [e for e in events if e["ph"] == "X" and e["cat"] == "module"]
    assert {e["args"]["module"] for e in modules} >= {"model.layers.0.self_attn", "model.layers.1.mlp", "lm_head"}
    for op in (e for e in events if e["ph"] == "X" and e["cat"] == "cpu_op" and e["args"]["module"]):
        around = [m for m in modules if m["ts"] <= op["ts"] and op["ts"] + 1 <= m["ts"] + m["dur"]]
        assert op["args"]["module"] in {m["args"]["module"] for m in around}
        path = op["args"]["module"].split(".")
        assert len(around) == len(path)  # one per level, no more


def test_the_counters_reach_the_reports_peaks(exported: tuple[vramsim.Report, list[dict[str, Any]]]) -> None:
    """Every allocator event is a counter sample, so the highest sample is the report's peak (the last step is
    the highest here); reserved is the allocator's, the reserved-only overheads aside (none on an H100)."""
    report, events = exported
    counters = [e for e in events if e["ph"] == "C"]
    assert max(c["args"]["allocated"] for c in counters) == report.peak_bytes
    assert max(c["args"]["reserved"] for c in counters) == report.reserved_bytes
    memory = [e for e in events if e["ph"] == "i"]
    assert max(e["args"]["Total Allocated"] for e in memory) == report.peak_bytes
    assert {e["name"] for e in memory} == {"[memory]"}
    assert all(e["args"]["Device Type"] == 1 and e["args"]["Device Id"] == 0 for e in memory)
    stamps = [c["ts"] for c in counters]
    assert stamps == sorted(stamps) and stamps[0] >= 0 and stamps[-1] < len(report.memory_history.ops) + 2  # type: ignore[union-attr]
