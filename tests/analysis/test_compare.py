"""``vramsim.compare``: variants of one job side by side, each with the figures its own ``simulate`` gives, one
trace per distinct program."""

from __future__ import annotations

from typing import Any

import pytest

import vramsim
from vramsim.analysis.compare import programs

FINETUNING = {
    "--lora-rank 16": {"lora": 16},
    "--quantization nf4 --lora-rank 16": {"quantization": "nf4", "lora": 16},
    "": {},
}
"""LoRA, QLoRA and full fine-tuning of Llama-3.1-8B, labelled as the command line gives them."""
SHARED = {"task": "train", "mixed_precision": "bf16", "batch_size": 1, "seq_len": 512}


def _figures(report: vramsim.Report) -> tuple[Any, ...]:
    return report.peak_bytes, report.reserved_bytes, report.device_bytes, report.fits


@pytest.fixture(scope="module")
def finetuning() -> vramsim.Comparison:
    return vramsim.compare("meta-llama/Llama-3.1-8B", FINETUNING, **SHARED)


def test_lora_qlora_full_match_separate_simulations(finetuning: vramsim.Comparison) -> None:
    """Each variant's peak, reserved, device figure and verdict are those of its own ``vramsim.simulate``."""
    assert [each.label for each in finetuning.variants] == list(FINETUNING)
    assert finetuning.traces == 3 and [each.trace for each in finetuning.variants] == [0, 1, 2]
    for each in finetuning.variants:
        alone = vramsim.simulate("meta-llama/Llama-3.1-8B", **SHARED, **FINETUNING[each.label])
        assert _figures(each.report) == _figures(alone), each.label


def test_finetuning_figures(finetuning: vramsim.Comparison) -> None:
    """The figures of this run (bf16 weights, batch 1, 512 tokens, on an H100): QLoRA holds the least (an NF4
    base), full fine-tuning the most (AdamW's two states for 8B parameters are its largest category)."""
    lora, qlora, full = (each.report for each in finetuning.variants)
    assert [r.device_bytes for r in (lora, qlora, full)] == [22_301_966_336, 16_843_079_680, 67_992_616_960]
    assert lora.fits and qlora.fits and full.fits
    largest = [max(r.breakdown, key=r.breakdown.__getitem__) for r in (lora, qlora, full)]
    assert largest == ["parameters", "parameters", "optimizer_states"]


def test_analysis_variants_share_one_trace() -> None:
    """Checkpointing and headroom variants are what-ifs over one trace, with the figures of separate runs; a
    headroom that leaves too little makes that variant not fit."""
    variants = {"none": {}, "full": {"checkpointing": "full"}, "tight": {"headroom": 0.9}, "zero3": {"gpus": 2, "zero": 3}}
    shared = {"task": "train", "seq_len": 64, "device": "t4"}
    comparison = vramsim.compare("gpt2", variants, **shared)
    assert comparison.traces == 1 and {each.trace for each in comparison.variants} == {0}
    for each in comparison.variants:
        assert _figures(each.report) == _figures(vramsim.simulate("gpt2", **shared, **variants[each.label])), each.label
    assert [each.report.fits for each in comparison.variants] == [True, True, False, True]


def test_programs_group_variants_by_what_is_traced() -> None:
    """Variants are one program when only analysis options differ; the groups keep the order first given."""
    variants = [
        {"seq_len": 16},
        {"seq_len": 16, "checkpointing": "full"},
        {"seq_len": 32},
        {"seq_len": 16, "headroom": 0.2, "gpus": 4, "zero": 3},
        {"seq_len": 32, "lora": {"r": 8}},
    ]
    assert programs(variants) == [[0, 1, 3], [2], [4]]


def test_a_variant_of_one_is_refused() -> None:
    with pytest.raises(vramsim.ConfigError, match="two or more variants, got 1"):
        vramsim.compare("gpt2", {"alone": {}})
