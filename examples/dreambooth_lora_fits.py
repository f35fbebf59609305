"""Will a DreamBooth LoRA of SDXL at 1024 px fit on a 24 GB card (RTX 4090), and with which options?

One training step as diffusers' ``train_dreambooth_lora_sdxl.py`` runs it (vramsim/workload/diffusion/training.py):
``--mixed_precision fp16`` (the UNet frozen in fp16, rank-4 adapters on to_k/to_q/to_v/to_out.0 upcast
to fp32), the VAE in fp32 encoding the 1024 px image each step, the prompt's embeddings precomputed
and the text encoders deleted (the script does this whenever the text encoders are not trained),
``torch.optim.AdamW`` over the adapters (vramsim's ``adamw-foreach``), gradients clipped at norm 1.0.
One trace gives both answers: with and without ``--gradient_checkpointing`` (a what-if over the traced graph).
It takes about 40 s on two cores.
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

CHOICES = {"as is": {"checkpointing": "none"}, "--gradient_checkpointing": {"checkpointing": "full"}}


def main() -> None:
    reports = dict(
        zip(
            CHOICES,
            vramsim.simulate_each(
                "stabilityai/stable-diffusion-xl-base-1.0",
                list(CHOICES.values()),
                task="train",
                lora=4,
                mixed_precision="fp16",
                optimizer="adamw-foreach",
                cache_text_embeddings=True,
                height=1024,
                width=1024,
                device="rtx-4090",
            ),
            strict=True,
        )
    )
    print(f"{'option':<26} {'peak':>10} {'on device':>10} {'activations':>12} {'peak in':>8} {'fits':>5}")
    for name, report in reports.items():
        where = report.peak_at.module.partition(".")[0]
        activations = format_bytes(report.breakdown.get("activations", 0))
        print(
            f"{name:<26} {format_bytes(report.peak_bytes):>10} {format_bytes(report.device_bytes):>10} "
            f"{activations:>12} {where:>8} {'yes' if report.fits else 'no':>5}"
        )
    plain = reports["as is"]
    print(f"trainable parameters: {plain.trainable_parameters:,} of {plain.parameters:,}")
    fitting = [name for name, report in reports.items() if report.fits]
    if not fitting:
        print("Answer: a DreamBooth LoRA of SDXL at 1024 px does not fit a 24 GB RTX 4090 with these options.")
        return
    best = min(reports, key=lambda name: reports[name].device_bytes)
    print(
        f"Answer: yes, as the script runs it with fp16 mixed precision ({format_bytes(plain.device_bytes)} on the "
        f"device); {best} brings it to {format_bytes(reports[best].device_bytes)}."
    )


if __name__ == "__main__":
    main()
