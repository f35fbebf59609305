"""Float8 training (``--float8``): torchao's Float8Linear on the linears torchtitan converts, where it runs."""

from __future__ import annotations

import pytest
from cli_runs import run

import vramsim
from vramsim.cache.keys import request_key
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.workload.build import build_program
from vramsim.workload.float8 import float8_linears

pytest.importorskip("torchao")

_TRAIN = {"task": "train", "batch_size": 2, "seq_len": 8, "dtype": "bf16"}


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"float8": "blockwise"}, ConfigError, "unknown float8 recipe 'blockwise'; choose one of: tensorwise, rowwise"),
        ({"float8": "rowwise", "task": "forward"}, ConfigError, "task='forward' takes no step"),
        ({"float8": "tensorwise", "device": "a100-80gb"}, UnsupportedError, r"a100-80gb \(sm 8\.0\) has none"),
        ({"float8": "tensorwise", "device": "v100-32gb"}, UnsupportedError, r"\(sm 7\.0\) has none"),
        ({"float8": "tensorwise", "device": "mi300x"}, UnsupportedError, "is not modelled; NVIDIA sm 8.9"),
        ({"float8": "tensorwise", "mixed_precision": "bf16"}, UnsupportedError, "float8 with mixed_precision"),
        ({"float8": "rowwise", "lora": 8}, UnsupportedError, "float8 with lora is not modelled yet"),
        ({"float8": "rowwise", "seq_len": 9}, ConfigError, "batch_size x seq_len is 18"),
        ({"float8": "rowwise", "gpus": 2, "tp": 2}, UnsupportedError, "float8 with tp, pp, cp or ep"),
    ],
)
def test_unsupported_float8_runs_are_refused_in_one_line(options: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match) as refused:
        SimulationConfig(**{**_TRAIN, **options})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("device", ["h100", "l4", "cpu"])
def test_float8_runs_on_targets_with_float8_matmuls(device: str) -> None:
    assert SimulationConfig(**_TRAIN, float8="tensorwise", device=device).float8 == "tensorwise"


def test_every_aligned_linear_but_the_head_becomes_float8(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """torchtitan's filter: both dims divisible by 16, and not the output head (its llama configs' filter_fqns)."""
    tiny_llama.intermediate_size = 120  # gate, up and down: 120 is not a multiple of 16
    program = build_program(tiny_llama, SimulationConfig(**_TRAIN, float8="rowwise"), device="meta")
    converted = float8_linears(program.model)
    assert converted == [f"model.layers.{i}.self_attn.{p}_proj" for i in range(2) for p in "qkvo"]


def test_the_cast_tensors_and_scales_are_traced_per_recipe(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """Each float8 linear's operands are cast to float8 (e4m3 forward, e5m2 for the output's gradient) with a float32
    scale per tensor (tensorwise) or per row (rowwise): the storages the trace holds say which."""
    from vramsim.analysis.traced import build_and_trace
    from vramsim.workload.targets import resolve_target

    found: dict[object, set[object]] = {}
    for recipe in ("tensorwise", "rowwise"):
        config = SimulationConfig(**_TRAIN, float8=recipe, device="h100")
        _, _, trace = build_and_trace(tiny_llama, config, resolve_target("h100"), checkpointing="applied")
        found[recipe, "dtypes"] = {s.dtype for s in trace.storages}
        found[recipe] = {s.shape for s in trace.storages if s.dtype == "float32" and s.op == "aten._to_copy"}
    assert {"float8_e4m3fn", "float8_e5m2"} <= found["tensorwise", "dtypes"]  # the gradient in e5m2
    assert "float8_e5m2" not in found["rowwise", "dtypes"]  # torchao's rowwise recipe: e4m3 throughout
    assert () in found["tensorwise"] and (16, 1) not in found["tensorwise"]
    assert (16, 1) in found["rowwise"]  # one scale per token of the 16


def test_float8_is_in_the_header_the_assumptions_and_the_cache_key(capsys, tiny_llama, tmp_path) -> None:  # type: ignore[no-untyped-def]
    keys = {request_key("simulate", tiny_llama, {**_TRAIN, "float8": name}) for name in (None, "tensorwise", "rowwise")}
    assert len(keys) == 3
    path = tmp_path / "config.json"
    tiny_llama.to_json_file(path)
    argv = ["trace", str(path), "--seq-len", "8", "--batch-size", "2", "--dtype", "bf16", "--device", "h100", "--no-cache"]
    code, out, _ = run(capsys, *argv, "--float8", "rowwise")
    assert code == 0
    assert "float8 torchao rowwise on 14 of 15 linears" in " ".join(out.split())
    report = vramsim.simulate(tiny_llama, **_TRAIN, float8="rowwise", device="h100")
    assert any(note.name == "float8_training" for note in report.assumptions)
    code, _, err = run(capsys, *argv, "--float8", "tensorwise", "--device", "a100-80gb")
    assert code == 1 and "(sm 8.0) has none" in err and len(err.strip().splitlines()) == 1


def test_float8_holds_more_than_bf16_in_eager_torchao(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """Eager Float8Linear saves the same high-precision tensors for backward as nn.Linear and adds its casts: the
    peak cannot be lower than bf16's, and the weights are the same."""
    plain = vramsim.simulate(tiny_llama, **_TRAIN, device="h100")
    float8 = vramsim.simulate(tiny_llama, **_TRAIN, float8="tensorwise", device="h100")
    assert float8.peak_bytes >= plain.peak_bytes
    assert float8.breakdown["parameters"] == plain.breakdown["parameters"]


def test_the_tracer_sees_the_ops_inside_a_float8_tensors_dispatch() -> None:
    """``aten.mm`` of two Float8TrainingTensors runs torchao's ``float8_mm`` on their inner tensors: the tracer
    records that op's own ops (the operand copy and ``_scaled_mm``), not the wrapper's ``mm`` alone."""
    import torch
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    from vramsim.tracer.mode import MemoryTracer
    from vramsim.tracer.scope import ModuleScope

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=False)).bfloat16()
        x = torch.empty(32, 64, dtype=torch.bfloat16)
    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name("tensorwise"))
    scope = ModuleScope({"": model})
    with scope, MemoryTracer(scope, devices={"meta"}) as tracer:
        tracer.register_module(model)
        model(x).float().sum().backward()
    names = [op.name for op in tracer.trace.ops]
    assert names.count("aten._scaled_mm") == 3 and "aten.mm" not in names  # output, grad_input, grad_weight
    copies = [s for s in tracer.trace.storages if s.op == "aten.contiguous" or s.op == "aten.clone"]
    assert copies and all(s.dtype.startswith("float8") for s in copies)
