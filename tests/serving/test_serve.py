"""KV cache read from the cache models really build, and ``vramsim serve`` end to end."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from vramsim.cli import main
from vramsim.serving.budget import read_kv_cache, serve
from vramsim.workload.models import load_config

BF16 = 2


def _attention(layers: list) -> list:
    return [layer for layer in layers if layer.kind not in ("state", "cross")]


def test_gqa_bytes_per_token_are_two_x_kv_heads_x_head_dim() -> None:
    """Llama-3.2-1B (GQA, 8 KV heads of 64): 2 x 8 x 64 x 2 B per layer; tensor parallel 2 halves the heads."""
    config = load_config("meta-llama/Llama-3.2-1B")
    layers = read_kv_cache(config, long_tokens=64)
    assert len(layers) == config.num_hidden_layers
    assert {layer.kind for layer in layers} == {"full"}
    assert sum(layer.bytes_per_token for layer in layers) == 2 * config.num_hidden_layers * 8 * 64 * BF16
    halved = read_kv_cache(config, long_tokens=64, tp=2)
    assert {layer.bytes_per_token for layer in halved} == {2 * 4 * 64 * BF16}


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    """vLLM keeps one KV head per rank when tensor parallel exceeds the KV heads."""
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2
    )
    layers = read_kv_cache(config, long_tokens=64, tp=4, dtype=torch.bfloat16)
    assert {layer.bytes_per_token for layer in layers} == {2 * 1 * 8 * BF16}


def test_mla_caches_the_compressed_latent() -> None:
    """DeepSeek-V3 (bundled): kv_lora_rank 512 + rope 64 elements per token per layer, no factor 2."""
    config = load_config("deepseek-ai/DeepSeek-V3")
    config.num_hidden_layers, config.first_k_dense_replace = 2, 1
    layers = read_kv_cache(config, long_tokens=64)
    assert [layer.kind for layer in layers] == ["latent", "latent"]
    assert {layer.bytes_per_token for layer in layers} == {(512 + 64) * BF16}


def test_sliding_window_layers_keep_their_window() -> None:
    """Mistral-style sliding window on every layer; Gemma-2's on alternate layers."""
    mistral = transformers.MistralConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=48,
    )
    layers = read_kv_cache(mistral, long_tokens=100, dtype=torch.bfloat16)
    assert [(layer.kind, layer.window) for layer in layers] == [("sliding", 47), ("sliding", 47)]
    assert {layer.bytes_per_token for layer in layers} == {2 * 2 * 16 * BF16}
    gemma = load_config("google/gemma-2-9b")
    gemma.num_hidden_layers, gemma.sliding_window = 4, 48
    kinds = [layer.kind for layer in read_kv_cache(gemma, long_tokens=100)]
    assert kinds == ["sliding", "full", "sliding", "full"]


def test_hybrid_model_has_state_layers() -> None:
    """Jamba: Mamba layers hold a fixed state (conv + SSM), attention layers grow per token."""
    config = transformers.JambaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        num_experts=2,
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
        use_mamba_kernels=False,
    )
    layers = read_kv_cache(config, long_tokens=64, dtype=torch.bfloat16)
    assert [layer.kind for layer in layers] == ["state", "full", "state", "full"]
    assert layers[1].bytes_per_token == 2 * 2 * 16 * BF16
    assert layers[0].state_bytes > 0 and layers[0].bytes_per_token == 0


def test_encoder_decoder_has_self_and_cross_layers() -> None:
    """T5-base: 12 decoder self-attention layers and 12 cross-attention layers, 2 x 12 heads x 64 each."""
    layers = read_kv_cache(load_config("google-t5/t5-base"), long_tokens=64, dtype=torch.bfloat16)
    assert [layer.kind for layer in layers].count("full") == 12
    assert [layer.kind for layer in layers].count("cross") == 12
    assert {layer.bytes_per_token for layer in layers} == {2 * 12 * 64 * BF16}


def test_serve_budget_and_fp8_cache() -> None:
    """The budget's terms add up, and an fp8 KV cache holds twice the tokens."""
    bf16 = serve("meta-llama/Llama-3.2-1B", device="h100", max_model_len=4096, enforce_eager=True)
    assert bf16.kv_cache_bytes == bf16.usable_bytes - bf16.weights_bytes - bf16.activation_peak_bytes
    assert bf16.kv_cache_tokens == bf16.kv_blocks * 16
    assert bf16.max_concurrency == pytest.approx(bf16.kv_cache_tokens / 4096)
    fp8 = serve("meta-llama/Llama-3.2-1B", device="h100", max_model_len=4096, enforce_eager=True, kv_cache_dtype="fp8")
    assert fp8.kv_blocks in (2 * bf16.kv_blocks, 2 * bf16.kv_blocks + 1)


def test_fp8_weights_store_linear_weights_in_one_byte() -> None:
    """--quantization fp8: each linear weight but the (tied) LM head loses a byte per element, gains a 4-byte scale."""
    config = load_config("meta-llama/Llama-3.2-1B")
    bf16 = serve(config, max_model_len=1024, enforce_eager=True)
    fp8 = serve(config, max_model_len=1024, enforce_eager=True, quantization="fp8")
    hidden, inter, kv = config.hidden_size, config.intermediate_size, config.num_key_value_heads * config.head_dim
    per_layer = [hidden * hidden, kv * hidden, kv * hidden, hidden * hidden, inter * hidden, inter * hidden, inter * hidden]
    saved = config.num_hidden_layers * sum(numel - 512 for numel in per_layer)  # 2 B -> 1 B, plus a scale's 512-B block
    assert bf16.weights_bytes - fp8.weights_bytes == saved
    assert fp8.kv_cache_bytes - bf16.kv_cache_bytes == saved


def test_cli_serve_prints_tokens_blocks_and_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "meta-llama/Llama-3.2-1B", "--device", "h100", "--max-model-len", "4096"]) == 0
    out = capsys.readouterr().out
    assert "KV cache:" in out and "blocks" in out and "Maximum concurrency at 4,096 tokens per request" in out
    assert main(["serve", "meta-llama/Llama-3.2-1B", "--max-model-len", "4096", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in (
        "weights_bytes",
        "activation_peak_bytes",
        "non_torch_bytes",
        "kv_cache_bytes",
        "kv_cache_tokens",
        "kv_blocks",
        "max_concurrency",
    ):
        assert key in data


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [  # 2: a bad argument, refused by ServeConfig's checks; 1: found against the model or the target
        (["--kv-cache-dtype", "fp4"], "unknown --kv-cache-dtype 'fp4'", 2),
        (["--engine", "trt"], "unknown engine 'trt'", 2),
        (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be a fraction", 2),
        (["--tp", "3"], "tensor parallel 3 must divide the 32 attention heads", 1),
        (["--device", "cpu"], "serving budgets are for GPUs", 1),
        (["--quantization", "int8wo"], "quantization 'int8wo' is not one vLLM serves", 2),
        (["--gpus", "3", "--tp", "2"], "--gpus 3 is not a multiple of --tp 2", 2),
    ],
)
def test_cli_serve_bad_input_is_one_line(argv: list[str], message: str, status: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "meta-llama/Llama-3.2-1B", *argv]) == status
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_encoder_decoder_budget_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "google-t5/t5-base"]) == 1
    assert "is an encoder-decoder" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "command", [["serve", "google-bert/bert-base-uncased"], ["trace", "google-bert/bert-base-uncased", "--task", "generate"]]
)
def test_models_that_cannot_generate_are_refused(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """BERT builds no KV cache: generate and serve say so in one line."""
    assert main(command) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vramsim: error: BertForMaskedLM cannot generate")


def test_fewest_gpus_for_a_concurrency() -> None:
    """--concurrency C: tensor-parallel groups times replicas that hold C requests, and no fewer GPUs would."""
    wanted = 300
    answer = serve("meta-llama/Llama-3.2-1B", device="l4", max_model_len=4096, concurrency=wanted)
    per_group = int(answer.max_concurrency)
    assert answer.gpus == answer.tp * answer.replicas and answer.concurrency == wanted
    assert per_group * answer.replicas >= wanted > per_group * (answer.replicas - 1)
    single = serve("meta-llama/Llama-3.2-1B", device="l4", max_model_len=4096)
    assert answer.gpus <= -(-wanted // int(single.max_concurrency))
