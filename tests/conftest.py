"""Tiny models shared by the tests: small enough to run for real on the CPU in milliseconds."""

from __future__ import annotations

import os

# Tests never need the Hugging Face Hub; offline mode makes an unknown id fail at once
# instead of after connection retries.
os.environ["HF_HUB_OFFLINE"] = "1"
# Each test traces what it asks: the result cache (vramsim/cache/) stays off, so no test answers from another's
# entry, or from the user's own cache, after a patch changed the figures. tests/cache/ turn it on, in a tmp folder.
os.environ["VRAMSIM_NO_CACHE"] = "1"

import pytest
import torch
import transformers
from tiny_models import tiny_llama_config

# One intra-op thread per test process. The suite runs in one worker per core (pytest -n 2 on CI's two
# cores, the architecture sweep's pool beside them): a second OpenMP thread per process only spin-waits
# for a core another process holds (a 256 KiB torch.full took 30 times longer with two threads than with
# one while other processes ran here). Predictions read the
# thread count (CPU kernels' per-thread scratch) in the same process that runs the real CPU programs.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's progress lines on a stderr that is no terminal start after some seconds, which a slow test
    machine may pass: tests read a command's own lines only (tests/cli/test_progress.py tests the lines)."""
    monkeypatch.setattr("vramsim.cli.output.PROGRESS_LINES_AFTER", float("inf"))


@pytest.fixture
def tiny_llama() -> transformers.LlamaConfig:
    return tiny_llama_config()


@pytest.fixture
def tiny_gpt2() -> transformers.GPT2Config:
    return transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=300, n_positions=128)


@pytest.fixture
def tiny_bert() -> transformers.BertConfig:
    return transformers.BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=300,
        max_position_embeddings=128,
        architectures=["BertForMaskedLM"],
    )
