"""vLLM's profile run as its V1 worker runs it: the sampler's warm-up per release, attention as the backends run in
that run, the release's CUDA graph accounting, and gpt-oss's MXFP4 experts."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers
from tiny_models import tiny_serving_llama_config

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.serving.budget import serve
from vramsim.serving.mxfp4 import mxfp4_layout
from vramsim.workload.models import load_config

TOKENS, SEQS, VOCAB = 2048, 256, tiny_serving_llama_config().vocab_size


def _gemma2() -> transformers.Gemma2Config:
    """A tiny Gemma-2: softcapped attention and logits, sliding layers, and no sdpa in transformers (eager by default)."""
    return transformers.Gemma2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=8192,
        sliding_window=64,
        dtype=torch.bfloat16,
    )


def _budget(config: transformers.PretrainedConfig, **options: object):  # type: ignore[no-untyped-def]
    return serve(config, device="h100", max_model_len=1024, enforce_eager=True, **options)


def test_the_sort_based_sampler_holds_twenty_four_more_bytes_per_logit() -> None:
    """Until 0.16 top-k/top-p sort the float32 logits: the peak is inside the sort, where its outputs, the sorted values
    (4 B) and int64 indices (8 B), and its scratch, int64 reverse indices (8 B) and cub's alternate keys and values
    (4 + 8 B), are live beside the bf16 and float32 logits (2 + 4 B); the Triton path's peak is the logits, the
    softmax and its noise (2 + 4 + 4 + 4 B): 24 B more per logit, within 1% (the whole run's allocator replay, whose
    unsplit remainders count in ``max_memory_allocated``, gives 23.9 B here)."""
    sort = _budget(tiny_serving_llama_config(), max_num_batched_tokens=TOKENS, max_num_seqs=SEQS, vllm_version="0.10")
    triton = _budget(tiny_serving_llama_config(), max_num_batched_tokens=TOKENS, max_num_seqs=SEQS, vllm_version="0.19")
    extra = sort.activation_peak_bytes - triton.activation_peak_bytes
    assert extra == pytest.approx(24 * SEQS * VOCAB, rel=1e-2)


def test_the_warm_up_samples_max_num_seqs_rows_of_float32_logits() -> None:
    """Each extra sequence adds at least its float32 softmax and noise rows over the vocabulary (Triton path)."""
    few = _budget(tiny_serving_llama_config(), max_num_batched_tokens=TOKENS, max_num_seqs=64)
    many = _budget(tiny_serving_llama_config(), max_num_batched_tokens=TOKENS, max_num_seqs=SEQS)
    assert many.activation_peak_bytes - few.activation_peak_bytes >= (SEQS - 64) * VOCAB * (2 + 4 + 4 + 4)


def test_gemma2_profiles_without_a_score_matrix() -> None:
    """transformers runs Gemma-2 eagerly (a float32 score matrix per layer, softcapped); vLLM's profile run computes
    no attention. Doubling the dummy batch grows the peak by far less than one layer's score matrix would."""
    short = _budget(_gemma2(), max_num_batched_tokens=2048, max_num_seqs=1)
    long = _budget(_gemma2(), max_num_batched_tokens=4096, max_num_seqs=1)
    score_matrix = 4 * 4096 * 4096 * 4  # heads x tokens x tokens x float32, one layer
    assert long.activation_peak_bytes - short.activation_peak_bytes < score_matrix / 20


def test_every_backend_profiles_alike_and_a_bad_one_is_refused() -> None:
    default = _budget(tiny_serving_llama_config(), max_num_batched_tokens=TOKENS, max_num_seqs=SEQS)
    flashinfer = _budget(
        tiny_serving_llama_config(), max_num_batched_tokens=TOKENS, max_num_seqs=SEQS, attention_backend="flashinfer"
    )
    assert flashinfer.kv_cache_bytes == default.kv_cache_bytes
    with pytest.raises(ConfigError, match="unknown attention_backend 'xformers'; choose one of: FLASH_ATTN"):
        _budget(tiny_serving_llama_config(), attention_backend="xformers")


@pytest.mark.parametrize(
    ("version", "error", "message"),
    [("0.7.3", UnsupportedError, "V0 engine, not modelled"), ("latest", ConfigError, "is not a version like 0.10.1")],
)
def test_versions_outside_v1_are_refused(version: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        _budget(tiny_serving_llama_config(), vllm_version=version)


def _held_bytes(nbytes: int) -> int:
    return -(-nbytes // 512) * 512  # the caching allocator's 512-B blocks


def test_gpt_oss_20b_serves_on_an_h100_with_mxfp4_experts() -> None:
    """The checkpoint's quantization_config (mxfp4) is read as vLLM reads it: each fused expert weight in uint8 blocks
    of two values plus a uint8 scale per 32 (Mxfp4MoEMethod), all else in bf16; an 8k request fits many times."""
    config = load_config("openai/gpt-oss-20b")
    mxfp4 = serve(config, device="h100", max_model_len=4096)
    plain = copy.deepcopy(config)
    del plain.quantization_config
    bf16 = serve(plain, device="h100", max_model_len=4096)
    experts, hidden, inter = config.num_local_experts, config.hidden_size, config.intermediate_size
    per_layer = [experts * hidden * 2 * inter, experts * inter * hidden]  # gate_up, down
    saved = config.num_hidden_layers * sum(_held_bytes(2 * n) - _held_bytes(n // 2) - _held_bytes(n // 32) for n in per_layer)
    assert bf16.weights_bytes - mxfp4.weights_bytes == saved
    assert mxfp4.weights_bytes / 2**30 == pytest.approx(12.82, abs=0.01)
    assert mxfp4.max_concurrency > 100


def _experts_bytes(experts: int, hidden: int, inter: int, *, packed: bool) -> int:
    """One layer's fused experts in closed form: gate_up (2 x inter rows) and down (hidden rows), each with its bias
    of its rows; ``packed``: uint8 blocks of two values plus a uint8 scale per 32, else bf16; biases bf16."""
    gate_up, down = experts * 2 * inter * hidden, experts * hidden * inter
    biases = _held_bytes(2 * experts * 2 * inter) + _held_bytes(2 * experts * hidden)
    if not packed:
        return _held_bytes(2 * gate_up) + _held_bytes(2 * down) + biases
    return sum(_held_bytes(n // 2) + _held_bytes(n // 32) for n in (gate_up, down)) + biases


def test_gpt_oss_20b_on_an_a100_holds_the_experts_marlin_pads() -> None:
    """Ampere has no FP4: vLLM 0.19 runs MXFP4 on Marlin, whose Mxfp4MoEMethod pads the intermediate size to a
    multiple of 128 and the hidden size to one of 256 (2880 -> 2944 and 3072): weights, scales and both biases at the
    padded shapes, 0.855 GiB more than the H100's Triton layout, whose figure stays the unpadded one."""
    config = load_config("openai/gpt-oss-20b")
    plain = copy.deepcopy(config)
    del plain.quantization_config
    options = dict(device="a100-80gb", max_model_len=4096, vllm_version="0.19.0")
    marlin, bf16 = serve(config, **options), serve(plain, **options)
    experts, hidden, inter, layers = (
        config.num_local_experts,
        config.hidden_size,
        config.intermediate_size,
        config.num_hidden_layers,
    )
    padded_hidden, padded_inter = -(-hidden // 256) * 256, -(-inter // 128) * 128
    assert (padded_hidden, padded_inter) == (3072, 2944)
    traced = _experts_bytes(experts, hidden, inter, packed=False)
    held = _experts_bytes(experts, padded_hidden, padded_inter, packed=True)
    assert marlin.weights_bytes == bf16.weights_bytes - layers * (traced - held)
    triton = _experts_bytes(experts, hidden, inter, packed=True)
    assert round(layers * (held - triton) / 2**30, 3) == 0.855


@pytest.mark.parametrize(
    ("version", "capability", "backend"),
    [
        ("0.10.1", (9, 0), "marlin"),  # torch 2.7.1: not is_torch_equal_or_newer("2.8.0")
        ("0.11.0", (9, 0), "triton"),
        ("0.21", (9, 0), "triton"),
        ("0.19.0", (8, 0), "marlin"),
        ("0.10.1", (8, 6), "marlin"),
        ("0.14.1", (10, 0), "flashinfer-trtllm"),
        ("0.11.0", (12, 0), "triton"),  # major 9 and up before 0.12
        ("0.19.0", (12, 0), "marlin"),  # triton_kernels only on 9.0 <= capability < 11.0
    ],
)
def test_the_mxfp4_moe_backend_follows_the_release_and_the_capability(
    version: str, capability: tuple[int, int], backend: str
) -> None:
    assert mxfp4_layout(version, "nvidia", capability).backend == backend


def test_mxfp4_with_lora_runs_on_marlin_from_0_11_1() -> None:
    assert mxfp4_layout("0.19.0", "nvidia", (9, 0), lora=True).backend == "marlin"
    assert mxfp4_layout("0.11.0", "nvidia", (9, 0), lora=True).backend == "triton"  # no LoRA path yet


def test_mxfp4_below_ampere_is_refused() -> None:
    with pytest.raises(UnsupportedError, match=r"compute capability 8\.0\+"):
        mxfp4_layout("0.19.0", "nvidia", (7, 5))


def test_the_docs_gpt_oss_120b_rows_stay_true() -> None:
    """docs/serving.md's vramsim column for gpt-oss-120b on one H100 on 0.11's Triton layout (vllm#33155, #27508)."""
    report = serve(
        "openai/gpt-oss-120b",
        device="h100",
        gpu_memory_utilization=0.95,
        max_num_batched_tokens=1024,
        vllm_version="0.11",
        max_model_len=131072,
    )
    gib = 2**30
    assert round(report.weights_bytes / gib, 2) == 60.77
    assert round(report.activation_peak_bytes / gib, 2) == 7.36
    assert round(report.kv_cache_bytes / gib, 2) == 7.10


def test_the_docs_gpt_oss_120b_marlin_row_stays_true() -> None:
    """docs/serving.md's vllm#23278 row: gpt-oss-120b on one H100 under the 0.10 line (torch 2.7.1) runs on Marlin,
    whose padded experts hold 5.13 GiB more than the Triton layout's 60.77 GiB (published: 65.97 GiB)."""
    report = serve(
        "openai/gpt-oss-120b",
        device="h100",
        gpu_memory_utilization=0.95,
        max_num_batched_tokens=1024,
        vllm_version="0.10.1",
        max_model_len=32768,
    )
    assert round(report.weights_bytes / 2**30, 2) == 65.90
