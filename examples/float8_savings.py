"""How much does Float8 save on a Llama-3.1-8B full fine-tune on 8 H100s with FSDP2?

bf16 weights and AdamW states, FSDP2 full sharding over 8 ranks, full activation checkpointing, one
sequence of 4,096 tokens per GPU; the linears without and with torchao's float8 training
(``convert_to_float8_training``, tensorwise and rowwise, every linear but the head as torchtitan
converts them). One trace per recipe: float8 changes the traced program. Float8 run eagerly saves the same
high-precision inputs for backward as bf16 and adds its casts and scales: this prints what that
changes in the allocated peak and on the device (the allocator's segments).
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

RECIPES = (None, "tensorwise", "rowwise")


def main() -> None:
    reports = [
        vramsim.simulate(
            "meta-llama/Llama-3.1-8B",
            float8=recipe,
            advice="none",
            task="train",
            batch_size=1,
            seq_len=4096,
            device="h100",
            dtype="bf16",
            gpus=8,
            fsdp="full",
            checkpointing="full",
        )
        for recipe in RECIPES
    ]
    print(f"{'linears':<11} {'peak allocated':>15} {'on device':>11} peak at")
    for recipe, report in zip(RECIPES, reports, strict=True):
        at = f"{report.peak_at.phase}, {report.peak_at.op}"
        print(f"{recipe or 'bf16':<11} {format_bytes(report.peak_bytes):>15} {format_bytes(report.device_bytes):>11} {at}")
    base = reports[0]

    def change(new: int, old: int) -> str:
        return f"{'saves' if new < old else 'adds'} {format_bytes(abs(new - old))}"

    said = [
        f"{recipe} {change(r.peak_bytes, base.peak_bytes)} allocated and {change(r.device_bytes, base.device_bytes)} "
        "on the device"
        for recipe, r in zip(RECIPES[1:], reports[1:], strict=True)
    ]
    print(
        f"Answer: against bf16's {format_bytes(base.peak_bytes)} peak ({format_bytes(base.device_bytes)} on the "
        f"device) per GPU, float8 {'; '.join(said)}: eager Float8Linear saves the bf16 inputs for backward as "
        "nn.Linear does and adds its casts, so it saves no memory here."
    )


if __name__ == "__main__":
    main()
