"""``--compile``: the saved set AOTAutograd's partitioner chooses, against real compiled CPU runs.

The fast test measures the partitioned graphs run eagerly on the CPU (the partitioner's saved
set, eager kernels). The inductor tests compile for real with a C++ compiler, about a minute each
on two cores; they run only with ``VRAMSIM_INDUCTOR_TESTS=1``. Generate is refused with
``--compile`` (tests/cli/test_bad_input.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

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


_INDUCTOR = pytest.mark.skipif(
    os.environ.get("VRAMSIM_INDUCTOR_TESTS") != "1" or shutil.which("g++") is None,
    reason="inductor compiles C++ for a minute or more; set VRAMSIM_INDUCTOR_TESTS=1 (needs g++)",
)


@_INDUCTOR
@pytest.mark.parametrize(
    ("options", "within"),
    [
        pytest.param({}, 0.0005, id="train"),
        pytest.param({"task": "forward"}, 0.0005, id="forward"),
    ],
)
def test_matches_a_real_inductor_run(options: dict[str, object], within: float) -> None:
    """The real thing: torch.compile with inductor on the CPU, profiled. The train step and the forward
    match to the byte here. bf16 autocast is not asserted: it read +2.6% and +4.8% in two runs, not yet
    diagnosed (docs/compile.md)."""
    config = {**_OPTIONS, **options}
    predicted = simulate(_llama(), device="cpu", compile=True, cache=False, **config).peak_bytes
    measured = measure_cpu(_llama(), SimulationConfig(device="cpu", compile=True, **config)).peak_bytes
    assert predicted / measured == pytest.approx(1.0, abs=within)


def test_compiles_on_a_gpu_target() -> None:
    """h100: one forward and one backward graph (the SDPA backend choice is read at trace time; a graph break
    inside the kernel emulation used to resume the model with ``inputs_embeds.device`` read as a torch.Size)."""
    report = simulate(_llama(), device="h100", compile=True, **_OPTIONS)
    note = next(a.detail for a in report.assumptions if a.name == "compile_partitioned")
    assert note.endswith("(1 forward and 1 backward graph(s) ran)")
    assert report.peak_bytes < simulate(_llama(), device="h100", **_OPTIONS).peak_bytes


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"mixed_precision": "bf16"}, id="bf16"),
        pytest.param({"gpus": 8, "fsdp": "full"}, id="fsdp2-8"),
        pytest.param({"task": "forward"}, id="forward"),
    ],
)
def test_compiles_with_each_option_on_h100(options: dict[str, object]) -> None:
    """Each runs the compiled graphs (none falls back to eager): checkpointing inside the graph as
    torch's checkpoint higher-order op, autocast captured, FSDP2 over the compiled trace."""
    report = simulate(_llama(), device="h100", compile=True, cache=False, **{**_OPTIONS, **options})
    note = next(a.detail for a in report.assumptions if a.name == "compile_partitioned")
    backward = 0 if options.get("task") == "forward" else 1
    assert note.endswith(f"(1 forward and {backward} backward graph(s) ran)")
    if "gpus" in options:
        assert any(a.name == "compile_sharded" for a in report.assumptions)


class _SinForAttention(torch.overrides.TorchFunctionMode):
    """Stands for the kernel emulation: it swaps SDPA for another op, so the graph shows whether it ran."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.nn.functional.scaled_dot_product_attention:
            return torch.sin(args[0])
        return func(*args, **(kwargs or {}))


def test_a_compiled_checkpoints_body_is_traced_without_the_torch_function_mode() -> None:
    """Why compile with checkpointing is refused (docs/compile.md): dynamo traces a checkpoint's body inside the
    mode's ``__torch_function__``, where the mode is off, so the emulation never sees the block's attention.
    Outside a checkpoint the mode applies. When torch changes this, this test fails and the refusal can go."""
    from torch.utils.checkpoint import checkpoint

    def block(q: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, q, q).cos()

    def graph_ops(fn: Callable[[torch.Tensor], torch.Tensor]) -> str:
        codes: list[str] = []

        def backend(gm: torch.fx.GraphModule, _: list[torch.Tensor]) -> torch.fx.GraphModule:
            codes.extend(m.code for m in (gm, *gm.modules()) if isinstance(m, torch.fx.GraphModule))
            return gm

        torch._dynamo.reset()
        with _SinForAttention():
            torch.compile(fn, backend=backend, fullgraph=True)(torch.randn(1, 2, 8, 4, requires_grad=True))
        return "\n".join(codes)

    assert "scaled_dot_product_attention" not in graph_ops(block)
    checkpointed = graph_ops(lambda q: checkpoint(block, q, use_reentrant=False))
    assert "tag_activation_checkpoint" in checkpointed
    assert "scaled_dot_product_attention" in checkpointed
