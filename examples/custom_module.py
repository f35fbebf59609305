"""Does my 300M-parameter custom transformer train at batch 32 on a 24 GB RTX 4090?

A plain PyTorch model, written and built on the CPU as people write it (nanoGPT-style: its
forward takes the targets and returns the logits and the loss), with its own inputs and loss.
vramsim traces a meta copy of it; the weights built here are not touched. Trained with bf16
autocast and fused AdamW, 512 tokens a sequence.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

import vramsim
from vramsim import format_bytes

VOCAB, WIDTH, LAYERS, HEADS, CONTEXT = 32_000, 1024, 22, 16, 512


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, HEADS, WIDTH // HEADS).unbind(2)  # (B, T, H, D) each
        attended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, WIDTH))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied, as nanoGPT ties them

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return logits, F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def batch(batch_size: int, seq_len: int) -> dict[str, torch.Tensor]:
    """The training loop's batch: token ids and the next-token targets."""
    return {"idx": torch.randint(VOCAB, (batch_size, seq_len)), "targets": torch.randint(VOCAB, (batch_size, seq_len))}


def fit_in(report: vramsim.Report) -> int:
    """The memory the job must fit in: the card's, less the headroom kept free."""
    return int((report.capacity_bytes or 0) * (1 - report.headroom))


def main() -> None:
    started = time.perf_counter()
    model = TinyGPT()  # on the CPU, as written; vramsim traces a copy of it on the meta device
    options = dict(
        inputs=batch, loss=lambda output: output[1], batch_size=32, seq_len=CONTEXT, device="rtx-4090", mixed_precision="bf16"
    )
    report = vramsim.simulate(model, **options)
    print(f"TinyGPT, {report.parameters:,} parameters, batch 32 x {CONTEXT} tokens, bf16 autocast, fused AdamW")
    print(
        f"peak allocated {format_bytes(report.peak_bytes)}, on the device {format_bytes(report.device_bytes)} "
        f"of {format_bytes(fit_in(report))} usable ({format_bytes(report.capacity_bytes or 0)} less 10%)"
    )
    if report.fits:
        print("Answer: yes, it trains at batch 32 on one RTX 4090.")
        return
    fit = vramsim.largest_fit(model, sizes=("batch_size",), traced=report, **options)
    assert fit.batch_size is not None
    print(
        f"Answer: no. Batch 32 needs {format_bytes(report.device_bytes)} on the device; "
        f"the largest batch that fits is {fit.batch_size.value} ({format_bytes(fit.batch_size.device_bytes or 0)}, "
        f"traced; {fit.batch_size.over} does not fit)."
    )
    for advice in report.advice:
        if advice.fits:
            print(f"At batch 32, {vramsim.advice_line(advice)}")
    print(f"({fit.traces + 1} traces in {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
