"""What vLLM and SGLang refuse at start-up, refused here with their reason: a length past the model's
positions, and a KV cache that cannot hold one request."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from vramsim.cli import main
from vramsim.errors import ConfigError, TraceError
from vramsim.serving.budget import serve
from vramsim.serving.max_model_len import derived_length
from vramsim.workload.models import load_config


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["serve", *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vramsim: error: ")
    return err


def test_gpt2_refuses_a_length_past_its_1024_positions(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's "User-specified max_model_len (4096) is greater than the derived max_model_len" (it answered 147x)."""
    err = _refusal(["gpt2", "--max-model-len", "4096"], capsys)
    assert "--max-model-len 4096 exceeds gpt2's 1,024 positions (max_position_embeddings); vLLM refuses it" in err
    assert "pass --max-model-len 1024 or less" in err and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in err


def test_llama_3_1_refuses_a_length_past_its_131072_positions(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama 3.1's llama3 rope type already counts its scaling in max_position_embeddings: 131,072, not x8."""
    err = _refusal(["meta-llama/Llama-3.1-8B", "--max-model-len", "200000"], capsys)
    assert "--max-model-len 200000 exceeds meta-llama/Llama-3.1-8B's 131,072 positions (max_position_embeddings)" in err


def test_sglang_refuses_a_longer_context_length_with_its_own_variable(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refusal(["gpt2", "--engine", "sglang", "--max-model-len", "1025"], capsys)
    assert "SGLang refuses it" in err and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in err


def test_one_request_that_does_not_fit_the_kv_cache_is_refused_with_the_tokens_it_holds() -> None:
    """Llama-3.1-8B at 131,072 tokens on an RTX 4090 (it answered 0.37x): 16 GiB per request, 5.67 GiB of KV
    cache, 46,432 tokens; vLLM's check_enough_kv_cache_memory refuses, with the longest length that fits."""
    with pytest.raises(ConfigError) as refused:
        serve("meta-llama/Llama-3.1-8B", device="rtx-4090", max_model_len=131072)
    message = str(refused.value)
    assert "one request of max_model_len=131072 tokens needs 16.00 GiB of KV cache" in message
    assert "leaves 5.67 GiB (46,432 tokens); vLLM refuses to start" in message
    assert "pass max_model_len=46432 or less, or raise gpu_memory_utilization or --tp" in message


def test_the_full_context_still_answers_where_it_fits() -> None:
    """Llama-3.1-8B at 131,072 tokens on an H200: 891,632 tokens of KV cache, 6.80 requests (vLLM 0.21, its CUDA graph
    estimate taken off)."""
    report = serve("meta-llama/Llama-3.1-8B", device="h200", max_model_len=131072)
    assert report.kv_cache_tokens == 891_632 and round(report.max_concurrency, 2) == 6.80


def test_no_memory_for_blocks_is_refused() -> None:
    """vLLM's "No available memory for the cache blocks": a tenth of an L4 does not hold Llama-3.2-1B's weights."""
    with pytest.raises(
        ConfigError, match=r"leaves no memory for the KV cache .*\(\"No available memory for the cache blocks\"\)"
    ):
        serve("meta-llama/Llama-3.2-1B", device="l4", max_model_len=4096, gpu_memory_utilization=0.1)


def test_the_default_length_is_the_models_and_a_longer_one_can_be_allowed(tmp_path: Path) -> None:
    """Without --max-model-len both engines serve the model's own length; VLLM_ALLOW_LONG_MAX_MODEL_LEN's
    counterpart lets a longer one through where the model runs past its positions (RoPE), and gpt2's position
    table still refuses a request past its 1,024 rows, as the real run fails."""
    assert serve("gpt2", device="h100", enforce_eager=True).max_model_len == 1024
    short = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256
    )
    short.save_pretrained(tmp_path)
    allowed = serve(str(tmp_path / "config.json"), device="h100", max_model_len=512, allow_long_max_model_len=True)
    assert allowed.max_model_len == 512
    with pytest.raises(TraceError, match=r"transformer\.wpe: nn\.Embedding has 1,024 rows"):
        serve("gpt2", device="h100", max_model_len=2048, allow_long_max_model_len=True)


def test_sglang_starts_and_caps_a_request_the_pool_cannot_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang does not refuse: its max_req_len is the token pool less one."""
    argv = ["meta-llama/Llama-3.2-1B", "--device", "l4", "--engine", "sglang", "--gpu-memory-utilization", "0.2"]
    assert main(["serve", *argv, "--max-model-len", "131072"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "One request of 131,072 tokens does not fit: SGLang starts but caps a request at" in out


@pytest.mark.parametrize(
    ("rope", "vllm", "sglang"),
    [
        ({"rope_type": "linear", "factor": 2.0}, 8192, 8192),
        ({"rope_type": "dynamic", "factor": 2.0}, 8192, 8192),
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, 8192, 4096),
        ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 1024}, 4096, 4096),
    ],
)
def test_rope_scaling_multiplies_the_positions_as_each_engine_reads_it(rope: dict, vllm: int, sglang: int) -> None:
    """vLLM: every factor but llama3's multiplies, yarn's the original positions; SGLang: no factor where the
    scaling names original_max_position_embeddings (Llama-2-13b's 4,096 positions)."""
    config = load_config("meta-llama/Llama-2-13b-hf")
    config.rope_parameters = {"rope_theta": 10000.0, **rope}
    assert (derived_length(config, "vllm").tokens, derived_length(config, "sglang").tokens) == (vllm, sglang)
