"""Tiny model configs as plain functions, for the fixtures of tests/conftest.py and for helpers that run outside
a test's fixtures (a module-level builder, a worker): one definition of each."""

from __future__ import annotations

import torch
import transformers


def tiny_llama_config() -> transformers.LlamaConfig:
    """A two-layer Llama small enough to run for real on the CPU in milliseconds."""
    return transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        max_position_embeddings=256,
    )


def tiny_serving_llama_config() -> transformers.LlamaConfig:
    """A two-layer bf16 Llama with a real vocabulary (32,000: the sampler warm-up's logits are sized by it) and
    4,096 positions, for serving budgets."""
    return transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        dtype=torch.bfloat16,
    )
