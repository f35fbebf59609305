"""``task="generate"`` on encoder-decoders, checked against a real CPU run of the same program."""

from __future__ import annotations

import pytest
import transformers

import vramsim


@pytest.mark.parametrize(
    "config",
    [
        transformers.T5Config(
            architectures=["T5ForConditionalGeneration"],
            vocab_size=128,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
        ),
        transformers.WhisperConfig(
            architectures=["WhisperForConditionalGeneration"],
            vocab_size=128,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
            d_model=32,
            encoder_layers=1,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_mel_bins=8,
            max_source_positions=1500,
            max_target_positions=64,
        ),
    ],
    ids=["t5", "whisper"],
)
def test_encoder_decoder_generates_and_matches_a_cpu_run(config: transformers.PretrainedConfig) -> None:
    """The decoder reads the encoder's output and an EncoderDecoderCache; the prediction equals the measurement."""
    result = vramsim.validate(config, task="generate", seq_len=8, max_new_tokens=3, device="cpu")
    assert result.predicted_bytes > 0
    assert result.error == pytest.approx(0.0, abs=0.005)


def test_a_static_cache_is_allocated_whole_at_the_prefill_and_never_derived(tiny_llama: transformers.LlamaConfig) -> None:
    """StaticCache holds prompt + new tokens from the prefill on; a dynamic one reaches the same size only at
    the end. A long static generation is traced whole: its cache is sized by the whole generation."""
    options = {"task": "generate", "batch_size": 2, "seq_len": 8, "max_new_tokens": 20, "device": "cpu"}
    static = vramsim.simulate(tiny_llama, cache_implementation="static", **options)
    assert static.settings["KV cache"] == "static"
    assert "decode_steps_derived" not in {a.name for a in static.assumptions}
    head_dim = tiny_llama.hidden_size // tiny_llama.num_attention_heads
    cache = 2 * tiny_llama.num_hidden_layers * 2 * tiny_llama.num_key_value_heads * (8 + 20) * head_dim * 4  # k, v; batch 2
    assert cache <= static.breakdown["kv_cache"] < cache + 1024  # and each layer's few-byte position counter
