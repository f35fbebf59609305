"""Which library's defaults fit a QLoRA fine-tune of Llama 3.2 1B on a 12 GB card (RTX 3060), and by how much?

The same fine-tune (NF4 base, rank-16 adapters on every linear layer, 2 x 1,024 tokens, bf16 weights given)
under three recipes (vramsim/config/recipes.py): transformers' Trainer with peft's
``prepare_model_for_kbit_training`` (embeddings, norms and head upcast to float32; adapters float32),
TRL 1.9's SFTTrainer (no k-bit preparation, bf16 autocast) and torchtune 0.6.1 (no preparation, bf16
adapters, its chunked cross-entropy). Each is traced: the differences are the libraries' own choices.
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

RECIPES = ("trainer", "trl-sft", "torchtune")


def main() -> None:
    reports = {
        recipe: vramsim.simulate(
            "meta-llama/Llama-3.2-1B",
            task="train",
            recipe=recipe,
            dtype="bf16",
            quantization="nf4",
            lora=16,
            batch_size=2,
            seq_len=1024,
            device="rtx-3060",
        )
        for recipe in RECIPES
    }
    print(f"{'recipe':<10} {'peak':>10} {'on device':>10} {'parameters':>11} {'fits':>5}")
    for recipe, report in reports.items():
        fits = "yes" if report.fits else "no"
        print(
            f"{recipe:<10} {format_bytes(report.peak_bytes):>10} {format_bytes(report.device_bytes):>10} "
            f"{format_bytes(report.breakdown['parameters']):>11} {fits:>5}"
        )
    lowest = min(reports, key=lambda name: reports[name].device_bytes)
    saved = reports["trainer"].device_bytes - reports[lowest].device_bytes
    print(f"Answer: {lowest} needs the least, {format_bytes(saved)} less than the Trainer's defaults.")


if __name__ == "__main__":
    main()
