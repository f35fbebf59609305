"""How few RTX 4090s full-fine-tune Llama-3.2-1B, and with which parallel setting?

bf16 mixed precision (fp32 master weights and AdamW states), 2,048 tokens per GPU. Every tensor-parallel
degree within the node, data-parallel scheme (DDP, ZeRO-1/2/3, FSDP2) and checkpointing choice (``auto``
included) on 1, 2, 4 and 8 GPUs is computed from the graph of one trace per tensor-parallel degree
(``vramsim.cheapest_strategy``), the cheapest that fits first: fewest GPUs, then least compute lost to
recompute, then fewest bytes sent.
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes


def main() -> None:
    search = vramsim.cheapest_strategy(
        "meta-llama/Llama-3.2-1B", gpus=8, task="train", seq_len=2048, dtype="fp32", mixed_precision="bf16", device="rtx-4090"
    )
    print(
        f"{len(search.candidates)} settings measured ({search.skipped} skipped) from {search.traces} traces in "
        f"{search.trace_seconds:.1f} s, of {format_bytes(search.usable_bytes)} usable per GPU"
    )
    best = search.cheapest
    if best is None:
        print(f"Answer: no setting fits on up to {search.max_gpus} RTX 4090s.")
        return
    layout = f"tensor parallel {best.tp}" if best.tp > 1 else best.scheme
    sent = format_bytes(int(best.communication))
    print(
        f"Answer: {best.gpus} RTX 4090s, {layout}, checkpointing {best.plan} "
        f"({format_bytes(best.device_bytes)} per GPU, {sent} sent per micro-batch)."
    )


if __name__ == "__main__":
    main()
