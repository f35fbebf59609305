"""``torch_autograd="1.10"``: PyTorch 1.10's softmax saved its input beside its output, measured on that stack."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig

import vramsim

MEASURED_PER_LAYER = {"installed": 352_354_304, "1.10": 419_463_176}
"""Bytes autograd saved per BERT-large layer (batch 4, seq 512, fp32, eager) in real CPU runs of
benchmarks/saved_by_torch_release.py: torch 2.13 + transformers 5.24, and torch 1.10.2 + transformers 4.16.2."""


def _bert(layers: int, hidden: int = 1024, heads: int = 16) -> BertConfig:
    return BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        vocab_size=30522,
        num_labels=2,
        architectures=["BertForSequenceClassification"],
    )


def _inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.zeros(batch, seq, dtype=torch.long), "labels": torch.zeros(batch, dtype=torch.long)}


def _layer_saved(autograd: str, device: str, **options: object) -> int:
    report = vramsim.simulate(
        _bert(1),
        task="train",
        batch_size=4,
        seq_len=512,
        attn_implementation="eager",
        device=device,
        steps=1,
        model_class="AutoModelForSequenceClassification",
        inputs=_inputs,
        torch_autograd=autograd,
        advice="none",
        **options,
    )
    return next(row.activation_bytes for row in report.layers if row.module == "bert.encoder.layer.0")


@pytest.mark.parametrize("autograd", ["installed", "1.10"])
def test_a_bert_large_layer_saves_what_each_release_saved(autograd: str) -> None:
    """The cpu target's saved bytes per layer against each stack's real run (the layer's share of the extended
    attention mask and LayerNorm statistics, 32 KiB, is counted with the layer here, not by the script)."""
    assert _layer_saved(autograd, "cpu") == pytest.approx(MEASURED_PER_LAYER[autograd], rel=1e-4)


def test_on_a_gpu_with_fp16_autocast_the_half_scores_are_what_1_10_kept() -> None:
    """Under fp16 autocast CUDA's softmax takes float16 scores with half_to_float (no cast): 1.10 kept those, two
    bytes a score, beside the float32 probabilities."""
    scores = 4 * 16 * 512 * 512
    fp32 = _layer_saved("1.10", "v100-16gb") - _layer_saved("installed", "v100-16gb")
    amp = _layer_saved("1.10", "v100-16gb", mixed_precision="fp16") - _layer_saved(
        "installed", "v100-16gb", mixed_precision="fp16"
    )
    assert (fp32, amp) == (4 * scores, 2 * scores)


def test_an_unknown_release_is_refused() -> None:
    with pytest.raises(vramsim.ConfigError, match=r"unknown torch_autograd '1\.9'; choose one of: installed, 1\.10"):
        vramsim.simulate(_bert(1, 64, 4), task="train", seq_len=8, torch_autograd="1.9")
