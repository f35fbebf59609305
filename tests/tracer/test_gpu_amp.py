"""fp16 autocast training: torch.amp's GradScaler recipe, traced with the scaler's own tensors."""

from __future__ import annotations

import pytest

import vramsim
from vramsim.config import SimulationConfig
from vramsim.tracer.records import Trace
from vramsim.workload.build import build_program
from vramsim.workload.targets import resolve_target
from vramsim.workload.tracing import trace_program


def trace_on(device: str, model: object, mixed_precision: str, optimizer: str = "adamw-foreach") -> Trace:
    target = resolve_target(device)
    config = SimulationConfig(batch_size=2, seq_len=32, device=device, mixed_precision=mixed_precision, optimizer=optimizer)
    with target.emulation() as emulation:
        program = build_program(model, config, device="meta", emulation=emulation, foreach=target.foreach)
        return trace_program(program, devices=target.counted_devices, workspaces=target.rules.workspaces)


def test_fp16_training_runs_the_grad_scaler(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """Scale (fp32) and growth tracker (int32) persist as state; each step makes found_inf, its
    per-device copy, the fp64 reciprocal and the fp32 inverse scale; the optimizer step still runs."""
    trace = trace_on("h100", tiny_llama, "fp16")
    kept = [(s.dtype, s.nbytes) for s in trace.storages if s.category == "optimizer_states" and s.shape == ()]
    assert ("float32", 4) in kept and ("int32", 4) in kept
    step = [s for s in trace.storages if s.step == 1 and s.phase == "optimizer" and s.shape == ()]
    assert sorted((s.op, s.dtype) for s in step if s.op != "aten._local_scalar_dense") == [
        ("aten._to_copy", "float32"),  # inv_scale = scale.double().reciprocal().float()
        ("aten._to_copy", "float32"),  # found_inf copied for the grads' device (_MultiDeviceReplicator)
        ("aten._to_copy", "float32"),  # inv_scale copied likewise
        ("aten._to_copy", "float64"),
        ("aten.full", "float32"),  # found_inf
        ("aten.reciprocal", "float64"),
    ]
    ops = {o.name for o in trace.ops if o.step == 1 and o.phase == "optimizer"}
    assert {"aten._amp_foreach_non_finite_check_and_unscale_", "aten._amp_update_scale_", "aten._foreach_lerp_"} <= ops
    assert any("found_inf = 0" in note for note in trace.notes)


def test_fp16_training_with_fused_adamw(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """A fused optimizer unscales inside its kernel (``_step_supports_amp_scaling``): GradScaler
    only checks for infs against a dummy inverse scale of 1, then hands the kernel the scale and
    found_inf; the kernel itself allocates nothing."""
    trace = trace_on("h100", tiny_llama, "fp16", optimizer="adamw")
    step = [s for s in trace.storages if s.step == 1 and s.phase == "optimizer"]
    assert sorted((s.op, s.dtype) for s in step if s.shape == ()) == [
        ("aten._to_copy", "float32"),  # found_inf, per device (_MultiDeviceReplicator)
        ("aten._to_copy", "float32"),  # the dummy inverse scale, per device
        ("aten.add", "float32"),  # found_inf summed over devices
        ("aten.full", "float32"),  # found_inf
        ("aten.full", "float32"),  # the dummy inverse scale of 1.0
        ("aten.mul", "float32"),  # grad_scale handed to the kernel
    ]
    assert len(step) == 6
    ops = [o.name for o in trace.ops if o.step == 1 and o.phase == "optimizer"]
    assert ops.index("aten._amp_foreach_non_finite_check_and_unscale_") < ops.index("aten._fused_adamw_")


def test_report_names_the_scaler_and_bf16_has_none(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    fp16 = vramsim.simulate(tiny_llama, seq_len=32, device="h100", mixed_precision="fp16")
    assert {"grad_scaler", "data_dependent"} <= {a.name for a in fp16.assumptions}
    bf16_trace = trace_on("h100", tiny_llama, "bf16")
    assert not any(o.name.startswith("aten._amp_") for o in bf16_trace.ops)
    bf16 = vramsim.simulate(tiny_llama, seq_len=32, device="h100", mixed_precision="bf16")
    assert "grad_scaler" not in {a.name for a in bf16.assumptions}


def test_fp16_weights_with_fp16_autocast_refused(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """GradScaler refuses to unscale fp16 gradients; the recipe keeps fp32 master weights."""
    with pytest.raises(vramsim.ConfigError, match="fp32 master weights"):
        vramsim.simulate(tiny_llama, seq_len=16, device="t4", dtype="fp16", mixed_precision="fp16")


def test_scaler_matches_a_real_cpu_run(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """torch.amp.GradScaler("cpu") runs the same recipe for real; the predicted peak is the measured one
    and holds the scaler's tensors (it exceeds the bf16 run's by their bytes)."""
    fp16 = vramsim.validate(tiny_llama, task="train", seq_len=32, batch_size=2, mixed_precision="fp16")
    bf16 = vramsim.validate(tiny_llama, task="train", seq_len=32, batch_size=2, mixed_precision="bf16")
    assert fp16.predicted_bytes == fp16.measured_bytes
    assert fp16.measured_bytes - bf16.measured_bytes == fp16.predicted_bytes - bf16.predicted_bytes > 0
