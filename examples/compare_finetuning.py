"""LoRA, QLoRA or full fine-tuning of Llama-3.1-8B: which fits my 48 GB GPU (an L40S)?

One sequence of 2,048 tokens, bf16 autocast over the checkpoint's bf16 weights, fused AdamW; each recipe with and
without full activation checkpointing. ``vramsim.compare`` traces each distinct program once (full fine-tuning,
LoRA r=16 on every linear layer, QLoRA: the same adapters over an NF4 base) and computes the checkpointed variants
from those traces: six variants, three traces.
"""

from __future__ import annotations

from typing import Any

import vramsim
from vramsim import format_bytes

GPU = "l40s"
SHARED: dict[str, Any] = {"task": "train", "batch_size": 1, "seq_len": 2048, "device": GPU, "mixed_precision": "bf16"}
VARIANTS: dict[str, dict[str, Any]] = {
    "full fine-tuning": {},
    "full checkpointed": {"checkpointing": "full"},
    "LoRA r=16": {"lora": 16},
    "LoRA checkpointed": {"lora": 16, "checkpointing": "full"},
    "QLoRA r=16 (NF4)": {"lora": 16, "quantization": "nf4"},
    "QLoRA checkpointed": {"lora": 16, "quantization": "nf4", "checkpointing": "full"},
}


def main() -> None:
    comparison = vramsim.compare("meta-llama/Llama-3.1-8B", VARIANTS, **SHARED)
    print(vramsim.compare_text(comparison, width=80))
    fitting = [each for each in comparison.variants if each.report.fits]
    if not fitting:
        print(f"Answer: none of the recipes fits one {GPU} at 2,048 tokens.")
        return
    least = min(fitting, key=lambda each: each.report.device_bytes)
    misses = [each for each in comparison.variants if not each.report.fits]
    missed = "; ".join(f"{each.label} ({format_bytes(each.report.device_bytes)})" for each in misses) or "none"
    print(
        f"Answer: {len(fitting)} of {len(VARIANTS)} fit one {GPU}: {'; '.join(each.label for each in fitting)}. "
        f"{least.label} needs the least ({format_bytes(least.report.device_bytes)} on the device). "
        f"Too large: {missed}."
    )


if __name__ == "__main__":
    main()
