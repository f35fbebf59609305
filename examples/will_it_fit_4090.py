"""Can I fine-tune Llama-3.1-8B on one 24 GB RTX 4090: fully, with LoRA, or with QLoRA?

One sequence of 2,048 tokens, full activation checkpointing, bf16 autocast, fused AdamW. Full
fine-tuning keeps fp32 weights; LoRA (r=16 on every linear layer) trains adapters over bf16
weights; QLoRA puts the same adapters over an NF4 base with double quantization, prepared by
peft's ``prepare_model_for_kbit_training`` as the QLoRA recipe does.
"""

from __future__ import annotations

from typing import Any

import vramsim
from vramsim import format_bytes

COMMON: dict[str, Any] = {
    "task": "train", "batch_size": 1, "seq_len": 2048, "device": "rtx-4090",
    "checkpointing": "full", "mixed_precision": "bf16",
}  # fmt: skip
LORA = {"r": 16, "lora_alpha": 32, "target_modules": "all-linear"}
RECIPES: dict[str, dict[str, Any]] = {
    "full fine-tuning": {"dtype": "fp32"},
    "LoRA r=16": {"dtype": "bf16", "lora": LORA},
    "QLoRA r=16 (NF4)": {"dtype": "bf16", "lora": LORA, "quantization": "nf4-dq"},
}
CATEGORIES = ("parameters", "gradients", "optimizer_states", "activations", "temporaries")


def main() -> None:
    reports = {name: vramsim.simulate("meta-llama/Llama-3.1-8B", **COMMON, **options) for name, options in RECIPES.items()}
    print(f"{'recipe':<18}" + "".join(f"{c.replace('_states', ''):>13}" for c in CATEGORIES) + f"{'on device':>12} fits")
    for name, report in reports.items():
        columns = "".join(f"{format_bytes(report.breakdown.get(c, 0)):>13}" for c in CATEGORIES)
        print(f"{name:<18}{columns}{format_bytes(report.device_bytes):>12} {'yes' if report.fits else 'no'}")
    fitting = [name for name, report in reports.items() if report.fits]
    if not fitting:
        print("Answer: none of the three fits one RTX 4090 at 2,048 tokens.")
        return
    first = fitting[0]
    print(
        f"Answer: {first} is the first recipe that fits one RTX 4090 "
        f"({format_bytes(reports[first].device_bytes)} of {format_bytes(reports[first].capacity_bytes)}); "
        f"{', '.join(n for n in reports if n not in fitting) or 'nothing'} does not."
    )


if __name__ == "__main__":
    main()
