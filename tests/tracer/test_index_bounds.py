"""A lookup past its table fails the trace, as the real run would: index bounds follow from shapes on meta."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import vramsim

LONG = 70_000
"""Positions past ``FACTORY_LIMIT`` (65,536): an arange that long has no values on meta, only its bounds."""


class NanoGPT(torch.nn.Module):
    """nanoGPT's embedding: a learned table of ``block_size`` positions looked up by ``torch.arange(t)``."""

    def __init__(self, block_size: int = 1024, vocab: int = 256, width: int = 32) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(block_size, width)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        _, t = idx.size()  # (b, t)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)  # shape (t)
        return self.lm_head(self.wte(idx) + self.wpe(pos))  # (b, t, vocab)


def tokens(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"idx": torch.randint(0, 256, (batch, seq))}


def test_positions_past_the_table_fail_the_trace() -> None:
    """At seq_len 2048 a 1,024-row position table is indexed up to 2,047: the trace fails in one line naming it."""
    message = (
        r"^wpe: nn.Embedding has 1,024 rows but its indices \(torch.arange, shape 2048\) reach 2,047; "
        r"the real run fails with 'index out of range in self'$"
    )
    with pytest.raises(vramsim.TraceError, match=message):
        vramsim.simulate(NanoGPT, inputs=tokens, loss=lambda out: out.sum(), seq_len=2048, device="cpu")


def test_positions_within_the_table_trace() -> None:
    report = vramsim.simulate(NanoGPT, inputs=tokens, loss=lambda out: out.sum(), seq_len=1024, device="cpu")
    assert report.peak_bytes > 0


def test_a_transformers_model_at_its_limit_traces() -> None:
    """GPT-2's positions (``cache_position.unsqueeze(0)``) reach 1,023 at 1,024 tokens: its table's last row."""
    report = vramsim.simulate("gpt2", task="forward", seq_len=1024, batch_size=1, device="cpu", advice="none")
    assert report.peak_bytes > 0


class Positions(torch.nn.Module):
    """A table of ``rows`` positions, looked up by ``make(t)``: only the input's length is read."""

    def __init__(self, rows: int, make: Callable[[int], torch.Tensor]) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(rows, 4)
        self.make = make

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(self.make(idx.shape[-1]).to(idx.device))


def _forward(rows: int, make: Callable[[int], torch.Tensor]) -> vramsim.Report:
    return vramsim.simulate(
        lambda: Positions(rows, make),
        task="forward",
        inputs=lambda b, t: {"idx": torch.empty(b, t, dtype=torch.long, device="meta")},
        seq_len=LONG,
        batch_size=1,
        device="cpu",
        advice="none",
    )


@pytest.mark.parametrize(
    ("rows", "make", "reach"),
    [
        (LONG - 1, lambda t: torch.arange(t, device="meta").unsqueeze(0).expand(2, t), LONG - 1),  # views of all of it
        (LONG + 1, lambda t: torch.arange(t, device="meta").int() + 2, LONG + 1),  # a cast, a known offset
        (LONG, lambda t: torch.cat([torch.arange(t, device="meta"), torch.full((1,), t, device="meta")]), LONG),
    ],
    ids=["expand", "cast-offset", "cat"],
)
def test_bounds_follow_shapes_without_values(rows: int, make: Callable[[int], torch.Tensor], reach: int) -> None:
    """Past the lengths whose values vramsim keeps, the least and greatest index still follow from shapes."""
    with pytest.raises(vramsim.TraceError, match=rf"has {rows:,} rows but its indices \(torch.arange, .*\) reach {reach:,};"):
        _forward(rows, make)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: torch.arange(2 * t, device="meta")[:t],  # a slice may leave the greatest value out
        lambda t: torch.arange(t, device="meta") - torch.arange(t, device="meta"),  # extremes in different elements
        lambda t: torch.arange(t, device="meta").flip(0) // 2,  # an op bounds do not follow
    ],
    ids=["slice", "difference", "unfollowed"],
)
def test_unknown_bounds_never_raise(make: Callable[[int], torch.Tensor]) -> None:
    """Where the greatest index is not certain, the trace goes on: no false alarm."""
    assert _forward(LONG, make).peak_bytes > 0


class MaskThenIndex(torch.nn.Module):
    """``x[mask, i]``: the 2-D mask indexes dims 0 and 1, so ``i`` (6) indexes dim 2 (7 long), not dim 1 (5)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.proj(torch.ones(3, 5, 7, 4, device=idx.device))
        mask = torch.ones(3, 5, dtype=torch.bool, device=idx.device)
        return x[mask, torch.full((1,), 6, device=idx.device)]


def test_a_mask_indexes_as_many_dims_as_it_has() -> None:
    report = vramsim.simulate(MaskThenIndex, task="forward", inputs=tokens, seq_len=8, device="cpu", advice="none")
    assert report.peak_bytes > 0
