"""``--compile``: the saved set AOTAutograd's partitioner chooses, against real compiled CPU runs.

The fast test measures the partitioned graphs run eagerly on the CPU (the partitioner's saved
set, eager kernels: exactly what vramsim models). The inductor test compiles for real with a C++
compiler, which takes minutes on two cores; it runs only with ``VRAMSIM_INDUCTOR_TESTS=1``.
Forward and generate are refused with ``--compile`` (tests/cli/test_bad_input.py).
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
import transformers

import vramsim.workload.build
from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.validation.measure import measure_cpu, measure_program_cpu
from vramsim.workload.build import build_program
from vramsim.workload.compiled import CompiledGraphs


def _llama() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=256,
        architectures=["LlamaForCausalLM"],
    )


_OPTIONS = {"task": "train", "batch_size": 2, "seq_len": 128}


def test_the_saved_set_is_the_partitioners_on_the_real_cpu_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training a compiled llama, fusion off: the prediction is the partitioned graphs' real CPU run;
    with fusion (the default) inductor's fused and in-place buffers come off it."""

    def unfused(model: torch.nn.Module, *, device: str) -> CompiledGraphs:
        graphs = CompiledGraphs(fusion=False)
        model.compile(backend=graphs.backend)
        return graphs

    monkeypatch.setattr(vramsim.workload.build, "compile_model", unfused)
    report = simulate(_llama(), device="cpu", compile=True, **_OPTIONS)
    monkeypatch.undo()

    def build():  # type: ignore[no-untyped-def]
        program = build_program(_llama(), SimulationConfig(device="cpu", **_OPTIONS), device="cpu")
        program.model.compile(backend=CompiledGraphs(fusion=False).backend)
        return program

    measured = measure_program_cpu(build).peak_bytes
    assert report.peak_bytes / measured == pytest.approx(1.0, abs=0.005)
    note = next(a.detail for a in report.assumptions if a.name == "compile_partitioned")
    assert note.endswith("(1 forward and 1 backward graph(s) ran)")
    fused = simulate(_llama(), device="cpu", compile=True, **_OPTIONS)
    assert any(a.name == "compile_fusion" for a in fused.assumptions)
    assert fused.peak_bytes < report.peak_bytes


@pytest.mark.skipif(
    os.environ.get("VRAMSIM_INDUCTOR_TESTS") != "1" or shutil.which("g++") is None,
    reason="inductor compiles C++ for minutes; set VRAMSIM_INDUCTOR_TESTS=1 (needs g++)",
)
def test_training_matches_a_real_inductor_run() -> None:
    """The real thing: torch.compile with inductor on the CPU, profiled."""
    predicted = simulate(_llama(), device="cpu", compile=True, **_OPTIONS).peak_bytes
    measured = measure_cpu(_llama(), SimulationConfig(device="cpu", compile=True, **_OPTIONS)).peak_bytes
    assert predicted / measured == pytest.approx(1.0, abs=0.005)


def test_compiles_on_a_gpu_target() -> None:
    """h100: one forward and one backward graph (the SDPA backend choice is read at trace time; a graph break
    inside the kernel emulation used to resume the model with ``inputs_embeds.device`` read as a torch.Size)."""
    report = simulate(_llama(), device="h100", compile=True, **_OPTIONS)
    note = next(a.detail for a in report.assumptions if a.name == "compile_partitioned")
    assert note.endswith("(1 forward and 1 backward graph(s) ran)")
    assert report.peak_bytes < simulate(_llama(), device="h100", **_OPTIONS).peak_bytes
