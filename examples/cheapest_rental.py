"""Fine-tune Llama-3.1-8B with LoRA on 2B tokens: which offer of a price sheet is cheapest?

LoRA of rank 16 on every linear layer, bf16 weights, 2,048 tokens per step per GPU, over the made-up offers of
``examples/prices.example.toml`` (vramsim ships no prices: write your own sheet), one GPU an order here: each
further GPU count costs the 8B more traces (its tensor-parallel ranks), so ``max_gpus=1`` keeps the example to one
trace per GPU model; without it, counts up to 8 took 12 traces. For each offer, ``vramsim.plan`` finds the
strategy search's cheapest setting that fits, derives how long 2B tokens take from that setting's traced step FLOPs
at the GPU's dense bf16 peak times the stated utilisation (``MODEL_FLOPS_UTILISATION``), and bills it in the
offer's periods.
"""

from __future__ import annotations

from pathlib import Path

import vramsim
from vramsim import format_bytes

SHEET = Path(__file__).with_name("prices.example.toml")


def main() -> None:
    found = vramsim.plan(
        "meta-llama/Llama-3.1-8B",
        prices=SHEET,
        tokens=2_000_000_000,
        max_gpus=1,
        task="train",
        lora=16,
        dtype="bf16",
        seq_len=2048,
    )
    print(f"{len(found.rows)} offer and GPU count(s) hold the job ({found.traces} traces, {found.trace_seconds:.0f} s)")
    for row in found.rows[:5]:
        bill = row.quote
        print(
            f"  {bill.offer} x{bill.gpus}: {format_bytes(row.setting.device_bytes)} per GPU, "
            f"{bill.duration.hours:,.1f} h, {bill.total:,} {bill.currency}"
        )
    best = found.cheapest
    if best is None:
        print("Answer: no offer of the sheet holds the job.")
        return
    bill = best.quote
    print(
        f"Answer: on orders of one GPU, {bill.offer} ({bill.provider}), {bill.gpus} x {bill.device}, "
        f"{bill.duration.hours:,.1f} hours: "
        f"{bill.total:,} {bill.currency} at the sheet's made-up prices (order key {bill.key[:12]}...)."
    )


if __name__ == "__main__":
    main()
