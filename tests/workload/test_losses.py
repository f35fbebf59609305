"""Named losses: Liger's fused linear cross-entropy never makes the whole logits; torchtune's chunked one is checked
against the real CPU run in tests/ground_truth."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from cli_runs import run, saved_config
from transformers import GPT2Config, LlamaConfig

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import LIGER_CHUNK_MEM_CONST
from vramsim.tracer.categories import Phase
from vramsim.tracer.kernels.liger import liger_chunk_size
from vramsim.tracer.records import StorageRecord
from vramsim.workload.targets import resolve_target

VOCAB, HIDDEN, BATCH, SEQ = 2048, 64, 2, 64
"""Llama-3.1-8B's vocabulary-to-width ratio (128,256 / 4,096 -> cdiv 32) on a tiny model."""


def _llama_8b_like() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        architectures=["LlamaForCausalLM"],
    )


def _loss_storages(device: str, **options: object) -> list[StorageRecord]:
    """The steady step's storages with a vocabulary-sized dimension, other than the head's weight and its gradient."""
    config = SimulationConfig(task="train", batch_size=BATCH, seq_len=SEQ, device=device, **options)  # type: ignore[arg-type]
    _, _, trace = build_and_trace(_llama_8b_like(), config, resolve_target(device), checkpointing="marked")
    return [s for s in trace.storages if s.step == 1 and VOCAB in s.shape and s.shape not in ((VOCAB, HIDDEN), (HIDDEN, VOCAB))]


def test_liger_chunk_size_is_liger_formula() -> None:
    """Liger's own worked example (BT 16,384, V 32,000, H 4,096 -> 2,048), Llama 3 8B at 8k tokens, and the BT cap."""
    assert liger_chunk_size(4096 * 4, 4096, 32000, 1) == 2048
    assert liger_chunk_size(8192, 4096, 128256, 1) == 256  # inc_factor 32
    assert liger_chunk_size(5, 8, 8, 1) == 5  # next_power_of_2(5) = 8, capped at BT
    assert liger_chunk_size(BATCH * SEQ, HIDDEN, VOCAB, 1) == 4
    assert liger_chunk_size(8192, 4096, 128256, 4) == 1024  # a larger budget: inc_factor 8


def test_liger_never_materialises_the_logits() -> None:
    """On an H100 with bf16 weights: one (chunk, vocab) logits buffer per step, written by mm(out=), no
    (batch x seq, vocab) tensor in forward or backward, and the head's gradient made in forward."""
    chunk = liger_chunk_size(BATCH * SEQ, HIDDEN, VOCAB, LIGER_CHUNK_MEM_CONST)
    storages = _loss_storages("h100", dtype="bf16", loss="liger-flce")
    assert Counter(s.shape for s in storages) == {(chunk, VOCAB): 1}
    model = _loss_storages("h100", dtype="bf16")  # the model's own loss: the whole logits, and float32 copies
    assert {(BATCH, SEQ, VOCAB), (BATCH * SEQ, VOCAB)} <= {s.shape for s in model}


def test_liger_on_rocm_allocates_each_chunk() -> None:
    """ROCm has no mm(out=) path: a new (chunk, vocab) logits tensor per chunk, still never the whole logits."""
    chunk = liger_chunk_size(BATCH * SEQ, HIDDEN, VOCAB, LIGER_CHUNK_MEM_CONST)
    storages = _loss_storages("mi300x", dtype="bf16", loss="liger-flce")
    assert Counter(s.shape for s in storages) == {(chunk, VOCAB): BATCH * SEQ // chunk}
    assert all(s.phase == Phase.FORWARD for s in storages)


def test_liger_lowers_the_peak_and_says_so() -> None:
    """The fused loss's peak is below the model's own on the same job, and the report names the kernel."""
    options = {"task": "train", "batch_size": BATCH, "seq_len": SEQ, "device": "h100", "dtype": "bf16"}
    fused = vramsim.simulate(_llama_8b_like(), loss="liger-flce", **options)
    own = vramsim.simulate(_llama_8b_like(), **options)
    assert fused.peak_bytes < own.peak_bytes
    assert "liger_fused_linear_cross_entropy" in {a.name for a in fused.assumptions}
    assert fused.options["loss"] == "liger-flce" and own.options["loss"] == "model"


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"loss": "liger-flce", "device": "cpu"}, UnsupportedError, "Triton"),
        ({"loss": "liger-flce", "task": "forward"}, ConfigError, "training loss"),
        ({"loss": "fused"}, ConfigError, "choose one of: model, liger-flce, chunked-ce[:N]"),
        ({"loss": "chunked-ce:0"}, ConfigError, "1 to 1024 chunks"),
        ({"loss": "chunked-ce", "tp": 2}, UnsupportedError, "tp or pp"),
    ],
)
def test_named_losses_are_checked(options: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        vramsim.simulate(_llama_8b_like(), **{"seq_len": 8, **options})


def test_a_model_without_a_decoder_and_head_is_refused() -> None:
    """GPT-2's decoder is .transformer: neither Liger's lce_forward nor the chunked head applies."""
    gpt2 = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=1, n_head=2, architectures=["GPT2LMHeadModel"])
    with pytest.raises(UnsupportedError, match="no lm_head after a decoder"):
        vramsim.simulate(gpt2, seq_len=8, device="h100", loss="liger-flce")


def test_cli_takes_named_losses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = saved_config(tmp_path, _llama_8b_like())
    code, out, _ = run(capsys, "trace", model, "--seq-len", "8", "--device", "cpu", "--loss", "chunked-ce:2", "--json")
    assert code == 0 and '"loss": "chunked-ce:2"' in out
    code, _, err = run(capsys, "trace", model, "--seq-len", "8", "--device", "cpu", "--loss", "liger")
    assert code == 2 and err.count("\n") == 1 and "unknown loss 'liger'" in err  # a bad argument
