"""transformers' attention implementations: what each one's kernel keeps for backward, and where it runs."""

from __future__ import annotations

import json

import pytest
import transformers

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.analysis.whatifs import Analysis
from vramsim.cli import main
from vramsim.config import SimulationConfig
from vramsim.estimators.checkpointing_plan import CheckpointPlan
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import StorageRecord, Trace
from vramsim.workload.targets import resolve_target

B, H, KV, D, S = 2, 4, 2, 16, 128  # batch, query heads, key/value heads, head dim, sequence


def _llama() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=H * D,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=H,
        num_key_value_heads=KV,
        vocab_size=128,
        max_position_embeddings=1024,
    )


def _trace(attention: str, seq_len: int = S) -> Trace:
    config = SimulationConfig(
        task="train", batch_size=B, seq_len=seq_len, device="h100", dtype="bf16", attn_implementation=attention
    )
    return build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="marked")[2]


def _last_step(trace: Trace, op: str) -> list[StorageRecord]:
    step = trace.ops[-1].step
    return [s for s in trace.storages if s.step == step and s.op == op]


def _saved(trace: Trace) -> list[StorageRecord]:
    """Storages made in the attention module during the last step that autograd saved for backward."""
    step = trace.ops[-1].step
    storages = {s.sid: s for s in trace.storages}
    held = sorted({h.sid for h in trace.holds})
    return [
        storages[sid]
        for sid in held
        if storages[sid].step == step and storages[sid].module.startswith("model.layers.0.self_attn")
    ]


def _saved_bytes(attention: str, seq_len: int) -> int:
    return sum(s.nbytes for s in _saved(_trace(attention, seq_len)))


@pytest.mark.parametrize(
    ("attention", "quadratic"),
    [
        ("eager", 12 * B * H * S * S),  # softmax's float32 output and its bf16 copy, (B, H, S, S) each
        ("sdpa", -16),  # cuDNN on an H100: output and logsumexp are linear; philox seed and offset are constant
        ("flash_attention_2", -16),  # out and softmax_lse are linear; rng_state (2,) int64 is constant
        ("flash_attention_3", 0),  # out and softmax_lse only
    ],
)
def test_saved_bytes_grow_quadratically_only_for_eager(attention: str, quadratic: int) -> None:
    """saved(2S) - 2 saved(S) cancels the linear terms: what is left is the S^2 term (and minus any constant)."""
    assert _saved_bytes(attention, 2 * S) - 2 * _saved_bytes(attention, S) == quadratic


def test_flash_attention_2_saves_what_flash_attn_saves() -> None:
    """FlashAttnFunc saves q, k, v, out, softmax_lse (B, H, S) in float32 and rng_state (2,) int64."""
    made = [(s.shape, s.dtype) for s in _saved(_trace("flash_attention_2")) if s.op == "vramsim_flash_attn.fa2_forward"]
    assert made == [((B, S, H, D), "bfloat16"), ((B, H, S), "float32"), ((2,), "int64")]


def test_flash_attention_2_backward_buffers() -> None:
    """mha_bwd: softmax_d (B, H, S rounded to 128) float32 out; dq_accum (B, S_128, H, D rounded to 32)
    float32 and GQA's dk/dv_expanded (B, S, H, D) bf16 as workspace."""
    trace = _trace("flash_attention_2", seq_len=100)
    assert [(s.shape, s.dtype) for s in _last_step(trace, "vramsim_flash_attn.fa2_backward")] == [((B, H, 128), "float32")]
    workspace = _last_step(trace, "vramsim_flash_attn.fa2_backward:workspace")
    assert [s.nbytes for s in workspace] == [B * 128 * H * 32 * 4 + 2 * B * 100 * H * D * 2]


def test_flash_attention_3_backward_buffers() -> None:
    """hopper mha_bwd returns softmax_d, softmax_lse_log2, dq_accum and GQA's dk/dv_accum in float32;
    head dim 16 rounds to 64, so kBlockM = kBlockN = 128 on sm90."""
    trace = _trace("flash_attention_3", seq_len=100)
    made = [s.shape for s in _last_step(trace, "vramsim_flash_attn.fa3_backward")]
    assert made == [(B, H, 128), (B, H, 128), (B, H, 128 * 64), (B, KV, 128 * 64), (B, KV, 128 * 64)]


@pytest.mark.parametrize(
    ("attention", "device", "message"),
    [
        ("flash_attention_2", "v100", "needs compute capability 8.0"),
        ("flash_attention_2", "t4", "needs compute capability 8.0"),
        ("flash_attention_2", "cpu", "does not run on the CPU"),
        ("flash_attention_3", "a100", "runs on Hopper"),
        ("flex_attention", "h100", "flex_attention refuses meta tensors"),
    ],
)
def test_refused_where_it_cannot_run(attention: str, device: str, message: str) -> None:
    with pytest.raises(vramsim.UnsupportedError, match=message):
        vramsim.simulate(_llama(), task="forward", seq_len=16, device=device, dtype="fp16", attn_implementation=attention)


def test_flash_attention_needs_half_precision_inputs() -> None:
    """float32 weights without autocast reach flash-attn in float32, which it refuses; under bf16
    autocast transformers casts the float32 (rotary-promoted) q, k, v to bf16 first."""
    with pytest.raises(vramsim.ConfigError, match="runs fp16/bf16 only"):
        vramsim.simulate(
            _llama(), task="forward", seq_len=16, device="h100", dtype="fp32", attn_implementation="flash_attention_2"
        )
    config = SimulationConfig(
        task="train", batch_size=B, seq_len=S, device="h100", mixed_precision="bf16", attn_implementation="flash_attention_2"
    )
    trace = build_and_trace(_llama(), config, resolve_target("h100"), checkpointing="marked")[2]
    assert {s.dtype for s in _last_step(trace, "vramsim_flash_attn.fa2_forward")} == {"bfloat16", "float32", "int64"}


def test_a_model_without_flash_support_is_refused() -> None:
    """transformers' own check: the model class must declare flash-attn support (T5 does not)."""
    config = transformers.T5Config(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, vocab_size=100)
    with pytest.raises(vramsim.UnsupportedError, match="does not support Flash Attention"):
        vramsim.simulate(config, task="forward", seq_len=16, device="h100", dtype="bf16", attn_implementation="flash_attention_2")


def test_cli_flag_reaches_transformers(capsys: pytest.CaptureFixture[str]) -> None:
    """--attn-implementation is passed on, and the JSON report names it; an unknown name is one line."""
    assert main(["trace", "gpt2", "--task", "forward", "--seq-len", "16", "--attn-implementation", "eager", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["options"]["attn_implementation"] == "eager"
    assert main(["trace", "gpt2", "--attn-implementation", "flash", "--seq-len", "16"]) == 2  # a bad argument
    assert "unknown --attn-implementation 'flash'" in capsys.readouterr().err


def test_the_report_names_the_default_kernel() -> None:
    """Without attn_implementation transformers picks SDPA where the model supports it; the report says so."""
    report = vramsim.simulate(_llama(), task="forward", seq_len=16, device="h100", dtype="bf16")
    assert report.options["attn_implementation"] == "sdpa"


def test_checkpointing_from_the_graph_equals_a_retrace() -> None:
    """selective keeps flash-attn's output like SDPA's; full and selective computed from one trace match
    torch's own checkpointing re-traced with the stand-ins (recompute runs them again)."""
    options = {
        "task": "train",
        "batch_size": B,
        "seq_len": S,
        "device": "h100",
        "dtype": "bf16",
        "attn_implementation": "flash_attention_2",
    }
    report = vramsim.simulate(_llama(), checkpointing="all", **options)
    answers = {choice.checkpointing: choice.peak_bytes for choice in report.checkpointing}
    target = resolve_target("h100")
    for choice in ("full", "selective"):
        config = SimulationConfig(checkpointing=choice, **options)
        trace = build_and_trace(_llama(), config, target, checkpointing="applied")[2]
        plain = SimulationConfig(**options)
        assert answers[choice] == Analysis(build_graph(trace), target, plain).run(CheckpointPlan("none")).memory.peak_bytes


def test_eager_matches_a_real_cpu_run() -> None:
    """attn_implementation reaches the real run too: eager training on the CPU, measured by the profiler."""
    validation = vramsim.validate(_llama(), task="train", batch_size=B, seq_len=S, attn_implementation="eager")
    assert abs(validation.error) < 0.005
