"""GPTQ, AWQ and FP8 weights: each format's storage to the byte, its kernel's temporaries, the CLI, the refusals."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from transformers import AwqConfig, FineGrainedFP8Config, GptOssConfig, GPTQConfig, LlamaConfig

import vramsim
from tests.cli_runs import run, saved_config
from vramsim import count_parameters, simulate
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.tracer.records import Trace
from vramsim.workload.quantization.marlin import MarlinLinear
from vramsim.workload.targets import resolve_target

_LINEARS = [(128, 128), (128, 64), (128, 64), (128, 128), (128, 256), (128, 256), (256, 128)]
"""(in, out) of a decoder layer's q, k, v, o, gate, up and down projections in ``_llama()``."""
_NORMS = 2 * 128 * 2
"""The layer's two RMSNorm weights, bf16, left unquantized."""
_H100_SMS = 132


def _llama() -> LlamaConfig:
    """Every output a multiple of 64, as Marlin needs (``MARLIN_OUT_FEATURES_MULTIPLE``)."""
    return LlamaConfig(
        vocab_size=128,
        max_position_embeddings=128,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        architectures=["LlamaForCausalLM"],
    )


def _marlin_bytes(
    in_features: int, out_features: int, *, awq: bool, bits: int = 4, group: int = 128, act_order: bool = False
) -> int:
    """gptqmodel's Marlin layers after post_init: packed int32 weight, compute-dtype scales per group,
    AWQ's packed int32 zeros, act order's int32 g_idx (parameters; the workspace is a buffer)."""
    groups = in_features // group
    packed = in_features * out_features * bits // 8
    zeros = groups * out_features * bits // 8 if awq else 0
    return packed + groups * out_features * 2 + zeros + (4 * in_features if act_order else 0)


def _layer_bytes(report: vramsim.Report) -> int:
    return next(row.parameter_bytes for row in report.layers if row.module == "model.layers.0")


@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_gptq_and_awq_layers_hold_marlins_tensors_to_the_byte(method: str) -> None:
    report = simulate(_llama(), task="forward", quantization=method, dtype="bf16", batch_size=1, seq_len=8)
    awq = method == "awq"
    assert _layer_bytes(report) == sum(_marlin_bytes(*shape, awq=awq) for shape in _LINEARS) + _NORMS
    assert report.parameters == count_parameters(_llama())  # counted as the values they stand for
    assert report.settings["quantization"] == f"{method.upper()} 4-bit, group 128, gptqmodel Marlin kernel"
    assert {"quantized_weights", "marlin_kernel"} <= {a.name for a in report.assumptions}


def test_a_gptq_config_object_with_act_order_keeps_g_idx_and_permutes_the_input() -> None:
    """GPTQConfig(bits=8, group_size=64, desc_act=True): g_idx and its sort indices stay, and each
    GEMM holds the permuted input (a_tmp) beside the fp32 reduce buffer."""
    quantization = GPTQConfig(bits=8, group_size=64, desc_act=True)
    config = SimulationConfig(task="forward", quantization=quantization, dtype="fp16", batch_size=1, seq_len=8)
    program, specs, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    layer = next(spec for spec in specs if spec.module == "model.layers.0")
    expected = sum(_marlin_bytes(*shape, awq=False, bits=8, group=64, act_order=True) for shape in _LINEARS)
    assert layer.parameter_bytes == expected + _NORMS
    marlin = [m for m in program.model.modules() if isinstance(m, MarlinLinear)]
    assert len(marlin) == 14 and not isinstance(program.model.lm_head, MarlinLinear)
    assert {m.g_idx_sort_indices.nbytes for m in marlin} == {4 * 128, 4 * 256}
    reduce_buffer = _H100_SMS * 16 * 256 * 4  # 8 rows round up to 16
    assert _workspaces(trace, "vramsim.marlin_gemm") == {reduce_buffer + 8 * k * 2 for k in (128, 256)}


@pytest.mark.parametrize(("seq_len", "block_rows"), [(8, 16), (100, 64)])
def test_marlin_gemm_holds_its_fp32_reduce_buffer(seq_len: int, block_rows: int) -> None:
    """gptq_marlin.cu: c_tmp of SMs x min(rows rounded up to 16, 64) x 256 floats, one per GEMM."""
    config = SimulationConfig(task="forward", quantization="awq", dtype="fp16", batch_size=1, seq_len=seq_len)
    program, _, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    assert _workspaces(trace, "vramsim.marlin_gemm") == {_H100_SMS * block_rows * 256 * 4}
    assert sum(op.name == "vramsim.marlin_gemm" for op in trace.ops) == 14 * config.steps
    workspace = {m.workspace.nbytes for m in program.model.modules() if isinstance(m, MarlinLinear)}
    assert workspace == {4 * _H100_SMS}  # max(SMs, 128) int32 per layer


def test_fp8_layers_hold_e4m3_weights_and_block_scales_to_the_byte() -> None:
    """transformers' FP8Linear: one byte per weight, a float32 scale per 128x128 block."""
    report = simulate(_llama(), task="forward", quantization="fp8", dtype="bf16", batch_size=1, seq_len=8)
    expected = sum(i * o + 4 * math.ceil(i / 128) * math.ceil(o / 128) for i, o in _LINEARS)
    assert _layer_bytes(report) == expected + _NORMS
    assert report.parameters == count_parameters(_llama())
    assert "fp8_activation_quant" in {a.name for a in report.assumptions}


def test_fp8_matmuls_quantize_their_input_before_the_gemm() -> None:
    """Each FP8 matmul writes its input in float8 [rows, K] with float32 scales [rows, K / 128]."""
    config = SimulationConfig(task="forward", quantization=FineGrainedFP8Config(), dtype="bf16", batch_size=2, seq_len=8)
    _, _, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    made = {(s.dtype, s.nbytes) for s in trace.storages if s.op == "vramsim.fp8_act_quant"}
    rows = 2 * 8
    assert made == {
        ("float8_e4m3fn", rows * 128),
        ("float8_e4m3fn", rows * 256),
        ("float32", rows * 4),
        ("float32", rows * 2 * 4),
    }
    assert sum(op.name == "vramsim.fp8_gemm" for op in trace.ops) == 14 * config.steps


def test_lora_trains_on_an_fp8_base_without_the_k_bit_recipe() -> None:
    """transformers' FP8LinearFunction backward dequantizes the weight; TRL prepares no FP8 base."""
    report = simulate(_llama(), task="train", quantization="fp8", dtype="bf16", lora=4, batch_size=1, seq_len=16)
    assert report.settings["weights"] == "bfloat16 (given)"
    assert report.breakdown["optimizer_states"] > 0 and "kbit_training" not in {a.name for a in report.assumptions}


@pytest.mark.parametrize("name", ["gptq", "awq", "fp8"])
def test_the_cli_traces_each_format_on_an_h100(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = saved_config(tmp_path, _llama())
    code, out, err = run(
        capsys,
        "trace",
        model,
        "--device",
        "h100",
        "--task",
        "generate",
        "--quantization",
        name,
        "--dtype",
        "fp16",
        "--seq-len",
        "16",
        "--max-new-tokens",
        "2",
    )
    assert code == 0, err
    assert ("FP8 e4m3" if name == "fp8" else f"{name.upper()} 4-bit") in out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quantization": "fp8", "device": "a100"}, "FP8 weights need an NVIDIA GPU of compute capability 8.9+"),
        ({"quantization": "awq", "device": "t4"}, "needs an NVIDIA GPU of compute capability 8.0+"),
        ({"quantization": "gptq", "device": "cpu"}, "needs an NVIDIA GPU of compute capability 7.5+"),
        ({"quantization": "gptq", "task": "train", "lora": 4, "device": "cpu"}, "is not an NVIDIA GPU"),
        ({"quantization": "fp8", "task": "train"}, "FP8 weights stay frozen"),
        ({"quantization": GPTQConfig(bits=4, sym=False)}, "sym=False"),
        ({"quantization": AwqConfig(bits=4, group_size=256)}, "group_size=256"),
        ({"quantization": "gptq", "dtype": "fp32"}, "computes in float16 or bfloat16"),
    ],
)
def test_what_is_not_modelled_is_refused_in_one_line(options: dict[str, object], message: str) -> None:
    arguments = {"task": "forward", "dtype": "bf16", "batch_size": 1, "seq_len": 8, **options}
    with pytest.raises(vramsim.UnsupportedError, match=message):
        simulate(_llama(), **arguments)


def test_a_quantization_config_not_simulated_names_the_ones_that_are() -> None:
    from transformers import EetqConfig

    with pytest.raises(vramsim.UnsupportedError, match="EetqConfig is not simulated yet; BitsAndBytesConfig, GPTQConfig"):
        simulate(_llama(), task="forward", quantization=EetqConfig(), seq_len=8)


def _workspaces(trace: Trace, op: str) -> set[int]:
    return {s.nbytes for s in trace.storages if s.op == f"{op}:workspace"}


def test_no_stand_in_outlives_a_simulation() -> None:
    from transformers.integrations import finegrained_fp8

    simulate(_llama(), task="forward", quantization="fp8", dtype="bf16", batch_size=1, seq_len=8)
    assert not hasattr(finegrained_fp8.fp8_linear, "__vramsim_patch__")


def test_torchao_int8_weight_only_counts_the_storages_its_tensor_subclass_owns() -> None:
    """torchao's Int8Tensor wraps int8 values [out, in], float32 scales [out, 1] and an int8 zero point
    [out, 1]; its linear casts the int8 weight to the input's dtype before the matmul."""
    pytest.importorskip("torchao")
    config = SimulationConfig(task="forward", quantization="int8wo", dtype="bf16", batch_size=1, seq_len=8)
    _, specs, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    layer = next(spec for spec in specs if spec.module == "model.layers.0")
    assert layer.parameter_bytes == sum(i * o + 4 * o + o for i, o in _LINEARS) + _NORMS
    assert layer.parameters == sum(i * o for i, o in _LINEARS) + 2 * 128
    casts = {s.nbytes for s in trace.storages if s.op == "aten._to_copy" and s.module.endswith("q_proj")}
    assert 128 * 128 * 2 in casts  # the bf16 copy of q_proj's int8 weight


def test_torchao_configs_not_modelled_are_refused() -> None:
    torchao = pytest.importorskip("torchao.quantization")
    from transformers import TorchAoConfig

    with pytest.raises(vramsim.UnsupportedError, match="torchao's Int8DynamicActivationInt8WeightConfig is not modelled"):
        simulate(_llama(), task="forward", quantization=TorchAoConfig(torchao.Int8DynamicActivationInt8WeightConfig()), seq_len=8)


@pytest.mark.parametrize(
    "options",
    [
        {"task": "forward", "batch_size": 2, "seq_len": 32},
        {"task": "generate", "batch_size": 1, "seq_len": 16, "max_new_tokens": 4},
    ],
    ids=["forward", "generate"],
)
@pytest.mark.parametrize("name", ["int8wo", "fp8-rowwise"])
def test_torchao_formats_match_a_real_cpu_run(options: dict[str, object], name: str) -> None:
    """torchao quantizes for real on the CPU: the measured peak of the real Int8Tensor or Float8Tensor model
    (torch._scaled_mm's CPU kernel computing in float32) is the prediction."""
    pytest.importorskip("torchao")
    from vramsim.validation.measure import measure_cpu

    options = {**options, "dtype": "bf16", "quantization": name, "device": "cpu"}
    predicted = simulate(_llama(), **options).peak_bytes
    measured = measure_cpu(_llama(), SimulationConfig(**options)).peak_bytes
    assert predicted / measured - 1 == pytest.approx(0.0, abs=0.005)


def test_torchao_int4_weight_only_holds_mslk_packing_to_the_byte() -> None:
    """torchao's Int4Tensor (plain packing, mslk's format): two int4 values per int8 byte [out, in / 2], bf16 scales
    and zero points [in / 128, out]; each matmul is mslk's bf16i4bf16_rowwise writing [rows, out] in bf16."""
    pytest.importorskip("torchao")
    import torch

    from vramsim.tracer.patches import leftovers

    config = SimulationConfig(task="forward", quantization="int4wo", dtype="bf16", batch_size=2, seq_len=8)
    _, specs, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    layer = next(spec for spec in specs if spec.module == "model.layers.0")
    assert layer.parameter_bytes == sum(i * o // 2 + 2 * 2 * (i // 128) * o for i, o in _LINEARS) + _NORMS
    assert layer.parameters == sum(i * o for i, o in _LINEARS) + 2 * 128
    outputs = {s.nbytes for s in trace.storages if s.op == "mslk.bf16i4bf16_rowwise"}
    assert outputs == {2 * 8 * o * 2 for o in (64, 128, 256)}
    assert sum(op.name == "mslk.bf16i4bf16_rowwise" for op in trace.ops) == 14 * config.steps
    assert not hasattr(torch.ops.mslk, "bf16i4bf16_rowwise") and not leftovers()  # the stand-ins are gone


def test_torchao_int4_tinygemm_holds_torchs_tiles_to_the_byte() -> None:
    """Int4TilePackedTo4dTensor: in features padded to 1024 and out features to 8, int32 tiles [n / 8, k / 128, 32, 4]
    (two int4 per byte) and a bf16 scale and zero point per group of 128 [k / 128, n, 2]; each matmul pads its input
    to 1024 columns and tinygemm writes [rows, n] in bf16."""
    pytest.importorskip("torchao")
    from vramsim.tracer.patches import leftovers

    config = SimulationConfig(task="forward", quantization="int4wo-tinygemm", dtype="bf16", batch_size=2, seq_len=8)
    _, specs, trace = build_and_trace(_llama(), config, resolve_target("a100"), checkpointing="applied")
    layer = next(spec for spec in specs if spec.module == "model.layers.0")
    padded = 1024
    assert layer.parameter_bytes == sum(padded * o // 2 + 2 * 2 * (padded // 128) * o for _, o in _LINEARS) + _NORMS
    rows = 2 * 8
    outputs = {s.nbytes for s in trace.storages if s.op == "aten._weight_int4pack_mm"}
    assert outputs == {rows * o * 2 for o in (64, 128, 256)}
    assert {s.nbytes for s in trace.storages if s.op == "aten.constant_pad_nd"} == {rows * padded * 2}
    assert not leftovers()


def test_torchao_fp8_rowwise_holds_row_scales_and_quantizes_each_token() -> None:
    """Float8Tensor per row: e4m3 weight and a float32 scale per output row; each input is quantized per token
    (float8 [rows, in] and float32 scales [rows, 1]) before torch._scaled_mm writes [rows, out]."""
    pytest.importorskip("torchao")
    config = SimulationConfig(task="forward", quantization="fp8-rowwise", dtype="bf16", batch_size=2, seq_len=8)
    _, specs, trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="applied")
    layer = next(spec for spec in specs if spec.module == "model.layers.0")
    assert layer.parameter_bytes == sum(i * o + 4 * o for i, o in _LINEARS) + _NORMS
    made = {(s.op, s.dtype, s.nbytes) for s in trace.storages if s.module == "model.layers.0.mlp.down_proj"}
    rows = 2 * 8
    assert {("aten._to_copy", "float8_e4m3fn", rows * 256), ("aten._scaled_mm", "bfloat16", rows * 128 * 2)} <= made


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quantization": "int4wo", "device": "a100"}, "simulate an H100 or H200, not NVIDIA A100"),
        ({"quantization": "int4wo-tinygemm", "device": "v100"}, "built for NVIDIA sm 8.0\\+ and AMD CDNA2\\+"),
        ({"quantization": "int4wo", "dtype": "fp16"}, "in bfloat16"),
        ({"quantization": "int4wo", "task": "train", "lora": 4}, "training on a torchao int4wo base is not modelled"),
        ({"quantization": "fp8-rowwise", "device": "a100"}, "torchao's float8 needs an NVIDIA GPU of compute capability 8.9+"),
    ],
)
def test_torchao_targets_not_modelled_are_refused(options: dict[str, object], message: str) -> None:
    pytest.importorskip("torchao")
    arguments = {"task": "forward", "dtype": "bf16", "batch_size": 1, "seq_len": 8, **options}
    with pytest.raises(vramsim.UnsupportedError, match=message):
        simulate(_llama(), **arguments)


def test_torchao_options_not_modelled_are_refused() -> None:
    torchao = pytest.importorskip("torchao.quantization")
    from transformers import TorchAoConfig

    preshuffled = TorchAoConfig(torchao.Int4WeightOnlyConfig(int4_packing_format="preshuffled"))
    with pytest.raises(vramsim.UnsupportedError, match="int4_packing_format='preshuffled'"):
        simulate(_llama(), task="forward", quantization=preshuffled, dtype="bf16", seq_len=8)
    per_tensor = TorchAoConfig(torchao.Float8DynamicActivationFloat8WeightConfig(granularity=torchao.PerTensor()))
    with pytest.raises(vramsim.UnsupportedError, match="granularity other than PerRow"):
        simulate(_llama(), task="forward", quantization=per_tensor, dtype="bf16", seq_len=8)


def test_the_cli_traces_torchao_int4_on_an_h100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torchao")
    model = saved_config(tmp_path, _llama())
    code, out, err = run(
        capsys,
        "trace",
        model,
        "--device",
        "h100",
        "--task",
        "generate",
        "--quantization",
        "int4wo",
        "--dtype",
        "bf16",
        "--seq-len",
        "16",
        "--max-new-tokens",
        "2",
    )
    assert code == 0, err
    assert "torchao int4 weight-only" in out


def test_the_largest_fit_builds_an_int4_model_as_its_traces_do() -> None:
    """The sequence search reads the model's position limit from a model built with mslk's helpers stood in."""
    pytest.importorskip("torchao")
    from vramsim.search.fitting import largest_fit

    fit = largest_fit(
        _llama(), sizes=("seq_len",), device="h100", quantization="int4wo", dtype="bf16", task="forward", seq_len=64
    )
    assert fit.seq_len is not None and (fit.seq_len.value, fit.seq_len.bound_by) == (128, "max_position_embeddings")


def test_a_checkpoint_quantization_config_left_as_a_dict_is_said_not_applied() -> None:
    """gpt-oss's and DeepSeek-V3's config.json carry their checkpoint's quantization_config (mxfp4, fp8), which
    transformers' ``from_config`` leaves a dict on the config and does not apply: the trace runs (it raised an
    AttributeError reading the dict as a GPTQ config) and the header says it was not applied: for mxfp4, that the
    experts are dequantized (to the bf16 of the checkpoint's other tensors), as transformers does without its kernels."""
    config = GptOssConfig(
        num_hidden_layers=2, hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, num_local_experts=4, num_experts_per_tok=2, vocab_size=128,
        layer_types=["sliding_attention", "full_attention"],
        quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]},
    )  # fmt: skip
    report = simulate(config, task="generate", seq_len=16, max_new_tokens=2, device="h100")
    assert report.settings["quantization"] == (
        "none: the checkpoint's mxfp4 experts dequantized, as transformers does without Triton 3.4+ and kernels"
    )
    assert report.settings["weights"] == "bfloat16 (an MXFP4 checkpoint's other tensors)"
