"""Which module of my custom model holds the memory?

A plain PyTorch model with a wide vocabulary head and a few transformer-style blocks, trained at batch 8 x 512
tokens. ``vramsim.inspect`` traces it once on the meta device and reads the trace by module: what each module
saved for backward, its own peak, and what is live at the step's peak by the op and module that allocated it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import vramsim
from vramsim import format_bytes

VOCAB, WIDTH, LAYERS, HEADS = 32_000, 512, 4, 8


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


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return F.cross_entropy(self.head(x).view(-1, VOCAB), targets.view(-1))


def batch(batch_size: int, seq_len: int) -> dict[str, torch.Tensor]:
    return {"idx": torch.randint(VOCAB, (batch_size, seq_len)), "targets": torch.randint(VOCAB, (batch_size, seq_len))}


def main() -> None:
    inspection = vramsim.inspect(Model(), inputs=batch, batch_size=8, seq_len=512, device="rtx-4090", dtype="fp32")
    tree = inspection.tree
    print(f"Model, {tree.parameters:,} parameters; peak allocated {format_bytes(inspection.peak_bytes)}")
    for child in tree.children:
        print(f"  {child.path:<8} {format_bytes(child.parameter_bytes):>11} weights  {format_bytes(child.saved_bytes):>11} saved")
    own = tree.saved_bytes - sum(child.saved_bytes for child in tree.children)  # the ops of Model.forward itself
    print(f"  (Model.forward's own ops, the loss: {format_bytes(own)} saved)")
    layers = next(child for child in tree.children if child.path == "blocks").children
    print(f"  each block saves {format_bytes(layers[0].saved_bytes)} ({len(layers)} blocks)")
    top = max(tree.children, key=lambda child: child.saved_bytes)
    largest = inspection.at_peak[0]
    where = f" in {largest.module}" if largest.module else " in Model.forward"
    print(
        f"Answer: {top.path} holds the most saved activations, {format_bytes(top.saved_bytes)} of "
        f"{format_bytes(tree.saved_bytes)}; at the peak the largest group is {largest.category} made by "
        f"{largest.op}{where}, {format_bytes(largest.nbytes)} of {format_bytes(inspection.peak_bytes)}."
    )


if __name__ == "__main__":
    main()
