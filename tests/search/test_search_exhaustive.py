"""The strategy search's pruning (bounds, auto weighed against a fit, the early stop) never changes its answer: on
small cases it names the setting an exhaustive search names, every setting on every GPU count measured."""

from __future__ import annotations

from functools import cache

import pytest
import transformers

import vramsim
from vramsim.results.strategy import Candidate
from vramsim.search.strategy import cheapest_strategy, strategy_searcher
from vramsim.search.strategy_space import settings

# Two layers of long activations under wide weights: checkpointing, tensor and context parallelism and the
# data-parallel schemes each decide a fit at some memory.
_MODEL = transformers.LlamaConfig(
    hidden_size=512,
    intermediate_size=2048,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=16000,
    max_position_embeddings=1024,
)
_ASKED = {"seq_len": 512, "batch_size": 2, "device": "h100", "mixed_precision": "bf16"}
# Narrow weights under eight long sequences: FSDP2 grad-op (every weight gathered through the step, the least data
# communicated) wins where it fits, over context-parallel layouts, so its gathered weights and reduce-scatter
# inputs, DeepSpeed's buckets and master partitions and the tensor-parallel references decide what is ruled out.
_LONG = transformers.LlamaConfig(
    hidden_size=256,
    intermediate_size=1024,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=8000,
    max_position_embeddings=1024,
)
_LONG_ASKED = {"seq_len": 1024, "batch_size": 8, "device": "h100", "mixed_precision": "bf16"}
_CASES = {"wide": (_MODEL, _ASKED), "long": (_LONG, _LONG_ASKED)}
_GPUS = 4


@cache
def _exhaustive(case: str, headroom: float) -> tuple[Candidate | None, list[Candidate]]:
    """The cheapest fit found by measuring every setting on 1, 2, 4 GPUs, and every candidate measured."""
    model, asked = _CASES[case]
    searcher = strategy_searcher(model, gpus=_GPUS, headroom=headroom, **asked)
    measured = []
    for gpus in (1, 2, 4):
        for setting in settings(gpus, searcher.source, searcher.config):
            candidate = searcher._measure(setting)
            if candidate is not None:
                measured.append(candidate)
    for gpus in (1, 2, 4):
        fitting = [c for c in measured if c.gpus == gpus and c.fits]
        if fitting:
            return min(fitting, key=lambda c: (c.key, c.checkpointing == "auto")), measured
    return None, measured


def _headroom(usable: int) -> float:
    capacity = vramsim.simulate(_MODEL, task="forward", seq_len=8, device=_ASKED["device"]).capacity_bytes
    assert capacity is not None
    return 1 - usable / capacity


@cache
def _usable(case: str, share: float) -> int:
    """Just above the measured figure ``share`` of the way up from the leanest setting's (all on the whole card)."""
    _, measured = _exhaustive(case, 0.0)
    figures = sorted({c.device_bytes for c in measured if c.checkpointing != "auto"})
    return figures[int(share * (len(figures) - 1))] + 1


@pytest.mark.parametrize(
    ("case", "share", "answer"),
    [
        ("wide", 0.01, (4, 4, 1, "one replica", "selective")),
        ("wide", 0.05, (4, 4, 1, "one replica", "none")),
        ("wide", 0.2, (1, 1, 1, "one GPU", "selective")),
        ("long", 0.03, (4, 2, 2, "FSDP2 grad-op", "full")),
        ("long", 0.3, (2, 1, 2, "FSDP2 grad-op", "selective")),
    ],
    ids=["tp4-selective", "tp4-none", "one-gpu-selective", "tp2-cp2-grad-op-full", "cp2-grad-op-selective"],
)
def test_the_search_answers_as_an_exhaustive_one(case: str, share: float, answer: tuple[int, int, int, str, str]) -> None:
    """At each usable memory the pruned search's cheapest setting is the exhaustive one, figure and all, and the
    pruning measured fewer settings (``auto`` weighed against the first fit, not measured before it)."""
    model, asked = _CASES[case]
    headroom = _headroom(_usable(case, share))
    expected, measured = _exhaustive(case, headroom)
    found = cheapest_strategy(model, gpus=_GPUS, headroom=headroom, **asked)
    assert found.cheapest == expected
    assert expected is not None
    assert (expected.gpus, expected.tp, expected.cp, expected.scheme, expected.checkpointing) == answer
    assert len(found.candidates) < len(measured) // 4
