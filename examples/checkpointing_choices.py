"""Which activation checkpointing lets my 8B LoRA fine-tune fit on one H100?

Llama-3.1-8B in bf16, LoRA adapters (r=16) on every linear layer, one sequence of 8,192
tokens. One trace without checkpointing; every choice is computed from its graph, and
``auto`` picks, layer by layer, the least recompute that fits.
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes


def main() -> None:
    report, auto = vramsim.simulate_each(
        "meta-llama/Llama-3.1-8B",
        [{"checkpointing": "all"}, {"checkpointing": "auto"}],
        task="train",
        seq_len=8192,
        device="h100",
        dtype="bf16",
        lora={"r": 16, "lora_alpha": 32, "target_modules": "all-linear"},
    )
    print(f"{'choice':<10} {'peak':>11} {'on device':>11} {'fits':>5} {'recomputed TFLOP':>17}")
    for choice in report.checkpointing:
        print(
            f"{choice.checkpointing:<10} {format_bytes(choice.peak_bytes):>11} {format_bytes(choice.device_bytes):>11} "
            f"{'yes' if choice.fits else 'no':>5} {choice.cost.recomputed_flops / 1e12:>17.1f}"
        )
    fitting = [choice for choice in report.checkpointing if choice.fits]
    if not fitting:
        print("Answer: no checkpointing choice fits one H100 at this length.")
        return
    on_device = [choice for choice in fitting if not choice.cost.offloaded_bytes]
    best = min(on_device or fitting, key=lambda choice: (choice.cost.recomputed_flops, choice.device_bytes))
    print(
        f"Answer: --checkpointing {best.checkpointing} fits ({format_bytes(best.device_bytes)} on the device) "
        f"with the least recompute ({best.cost.recomputed_flops / 1e12:.1f} TFLOP per step)."
    )
    chosen = auto.checkpointing[0]
    print(
        f"Per layer (--checkpointing auto): {chosen.checkpointing} fits ({format_bytes(chosen.device_bytes)} on the "
        f"device) with {chosen.cost.recomputed_flops / 1e12:.1f} TFLOP recomputed per step."
    )
    for choice in fitting:
        if choice.cost.offloaded_bytes:
            print(
                f"--checkpointing offload fits too ({format_bytes(choice.device_bytes)}) with no recompute, but copies "
                f"{format_bytes(choice.cost.offloaded_bytes)} to host memory and back every step."
            )


if __name__ == "__main__":
    main()
