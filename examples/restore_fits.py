"""Will restoring my Llama-3.1-8B full fine-tune checkpoint fit on one H100, and how big is it on disk?

Full fine-tuning in bf16 weights with fused AdamW (bf16 states), one sequence of 2,048 tokens, full
activation checkpointing, saved every N steps by the Hugging Face Trainer. A preemption means a
resume: the weights file is read on the host and copied into the model, the optimizer state is
``torch.load``-ed on the host (the Trainer's ``map_location="cpu"`` on one GPU) and copied to the
device. (``save_format="torch"`` answers for a plain loop's one ``torch.save`` file instead.)
"""

from __future__ import annotations

from typing import Any

import vramsim
from vramsim import format_bytes

RUN: dict[str, Any] = {"batch_size": 1, "seq_len": 2048, "device": "h100", "dtype": "bf16", "checkpointing": "full"}
MODEL = "meta-llama/Llama-3.1-8B"


def main() -> None:
    trainer = vramsim.checkpoint(MODEL, **RUN)
    for item in trainer.files:
        print(f"{item.name:<24}{format_bytes(item.bytes):>12}  {item.holds}")
    print(f"{'checkpoint folder':<24}{format_bytes(trainer.disk_bytes):>12}")
    print(f"{'':<28}{'on the GPU':>14}{'host RAM':>12}")
    print(f"{'save':<28}{format_bytes(trainer.save_device_bytes):>14}{format_bytes(trainer.save_host_bytes):>12}")
    print(
        f"{'restore (map_location=cpu)':<28}{format_bytes(trainer.restore_device_bytes):>14}"
        f"{format_bytes(trainer.restore_host_bytes):>12}"
    )
    print(f"{'the training step after it':<28}{format_bytes(trainer.train_device_bytes):>14}")
    capacity = format_bytes(trainer.capacity_bytes or 0)
    verdict = "fits" if trainer.fits else "does not fit"
    print(
        f"Answer: the checkpoint takes {format_bytes(trainer.disk_bytes)} on disk; resuming it with the Trainer "
        f"{verdict} on one H100 ({format_bytes(trainer.restore_device_bytes)} to restore, "
        f"{format_bytes(trainer.train_device_bytes)} for the next step, of {capacity}) and needs "
        f"{format_bytes(trainer.restore_host_bytes)} of host RAM for the optimizer state."
    )


if __name__ == "__main__":
    main()
