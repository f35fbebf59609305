"""How few RTX 4090s full-fine-tune Llama-3.2-1B, and with which data-parallel setting?

bf16 mixed precision (fp32 master weights and AdamW states), 2,048 tokens per GPU. One trace:
every scheme (DDP, ZeRO-1/2/3, FSDP2) with every checkpointing choice on 1, 2, 4 and 8 GPUs is
computed from its graph (``vramsim.cheapest_strategy``), the cheapest that fits first: fewest GPUs,
then least recompute, then least communication.
"""

from __future__ import annotations

import vramsim
from vramsim.render import format_bytes


def main() -> None:
    search = vramsim.cheapest_strategy("meta-llama/Llama-3.2-1B", gpus=8, task="train", seq_len=2048,
                                       mixed_precision="bf16", device="rtx-4090")  # fmt: skip
    alone = [c for c in search.candidates if c.gpus == 1]
    print(f"{len(search.candidates)} settings from one trace in {search.trace_seconds:.1f} s; on one GPU the least "
          f"is {format_bytes(min(c.device_bytes for c in alone))} of {format_bytes(search.usable_bytes)} usable")  # fmt: skip
    best = search.cheapest
    if best is None:
        print(f"Answer: no setting fits on up to {search.max_gpus} RTX 4090s.")
        return
    print(f"Answer: {best.gpus} RTX 4090s with {best.scheme}, checkpointing {best.checkpointing} "
          f"({format_bytes(best.device_bytes)} per GPU).")  # fmt: skip


if __name__ == "__main__":
    main()
