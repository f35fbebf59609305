"""``--offload model|sequential`` against accelerate's own hooks run for real on the CPU.

vramsim traces the two offloads with its own rendering of them (``vramsim/workload/diffusion/residency.py``):
accelerate's sequential hooks hold an offloaded weight on the meta device, which is the trace's compute device
too, so they cannot run in the trace. The real run here is the tiny SDXL pipeline's call on the CPU with
accelerate's hooks placed as diffusers' ``enable_model_cpu_offload`` (``cpu_offload_with_hook`` along the
pipeline's ``model_cpu_offload_seq``, every component offloaded at the end by ``maybe_free_model_hooks``) and
``enable_sequential_cpu_offload`` (``cpu_offload`` of each component) place them. ``placement.py`` gives their
moves the compute device's meaning: a weight brought to the device is a real tensor, a weight sent to the host
a stand-in that owns no memory, and the weights on the device say they are on ``cpu:0`` as they would say
``cuda:0``, so accelerate offloads what it would offload on a GPU. The profiler then measures what the device
would hold; host memory and copy time are not measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.validation.measure import measure_program_cpu
from vramsim.workload.build import build_program
from vramsim.workload.diffusion.placement import COMPUTE, Placement
from vramsim.workload.diffusion.spec import find_pipeline, pipeline_class
from vramsim.workload.program import Program

TINY = str(Path(__file__).parent / "pipelines" / "tiny-sdxl")
_CALL = {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64}
KONTEXT = str(Path(__file__).parent / "pipelines" / "tiny-flux-kontext")
_KONTEXT_CALL: dict[str, Any] = {"task": "generate", "num_inference_steps": 2}


def _with_accelerate_hooks(mode: str, folder: str = TINY, call: dict[str, Any] = _CALL) -> Program:
    """The pipeline's program on the CPU, every weight resident, then accelerate's hooks as diffusers places them."""
    from accelerate import cpu_offload, cpu_offload_with_hook

    program = build_program(folder, SimulationConfig(device="cpu", **call), device="cpu")
    weights = [t for module in program.modules.values() for t in (*module.parameters(), *module.buffers())]
    placement = Placement(device="cpu", weights=weights)
    hooks: list[Any] = []
    with placement:
        if mode == "model":
            previous = None
            spec = find_pipeline(folder)
            assert spec is not None
            for name in pipeline_class(spec.class_name).model_cpu_offload_seq.split("->"):
                if name in program.modules:
                    _, previous = cpu_offload_with_hook(program.modules[name], COMPUTE, prev_module_hook=previous)
                    hooks.append(previous)
        else:
            for module in program.modules.values():
                cpu_offload(module, COMPUTE, offload_buffers=len(module._parameters) > 0)
    step = program.step

    def offloaded_call(program: Program, observer: Any) -> None:
        with placement:
            step(program, observer)
            for hook in hooks:  # maybe_free_model_hooks: every component back on the host
                hook.offload()

    program.step = offloaded_call
    return program


@pytest.mark.parametrize("mode", ["model", "sequential"])
def test_offload_matches_accelerates_hooks_run_for_real(mode: str) -> None:
    predicted = simulate(TINY, device="cpu", offload=mode, **_CALL).peak_bytes
    measured = measure_program_cpu(lambda: _with_accelerate_hooks(mode)).peak_bytes
    assert predicted / measured - 1 == pytest.approx(0, abs=0.005), (predicted, measured)


def test_kontext_model_offload_matches_accelerates_hooks_run_for_real() -> None:
    """Kontext calls the VAE twice, to encode before the transformer and to decode after it; accelerate's chain of
    hooks along ``model_cpu_offload_seq`` against vramsim's rendering of it (the decode sets this peak)."""
    predicted = simulate(KONTEXT, device="cpu", offload="model", **_KONTEXT_CALL).peak_bytes
    measured = measure_program_cpu(lambda: _with_accelerate_hooks("model", KONTEXT, _KONTEXT_CALL)).peak_bytes
    assert predicted / measured - 1 == pytest.approx(0, abs=0.005), (predicted, measured)
