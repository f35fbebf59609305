"""Predicted vs measured on a real CUDA GPU, for bundled models from 1B to 8B parameters.

Run on a machine with one GPU (about 8 minutes on an H200):

    python benchmarks/gpu_validation.py            # prints a Markdown table
    OUT=results/ python benchmarks/gpu_validation.py  # also writes results/gpu_validation.json

Each case runs the same workload code as the simulator (vramsim.program) on cuda:0 and compares
``max_memory_allocated`` and ``max_memory_reserved`` over the steady-state step with the
prediction for the catalog entry of that GPU.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

import vramsim
from vramsim.validation import cuda_target_name

CASES: list[tuple[str, str, dict]] = [
    ("llama3.2-1b train bf16-autocast", "meta-llama/Llama-3.2-1B",
     dict(task="train", batch_size=4, seq_len=2048, mixed_precision="bf16")),
    ("llama3.2-1b train bf16-autocast ckpt", "meta-llama/Llama-3.2-1B",
     dict(task="train", batch_size=4, seq_len=4096, mixed_precision="bf16", gradient_checkpointing=True)),
    ("llama3.2-3b train bf16 weights", "meta-llama/Llama-3.2-3B",
     dict(task="train", batch_size=2, seq_len=2048, dtype="bf16")),
    ("qwen2.5-0.5b forward bf16", "Qwen/Qwen2.5-0.5B", dict(task="forward", batch_size=8, seq_len=4096, dtype="bf16")),
    ("llama3.1-8b forward bf16", "meta-llama/Llama-3.1-8B", dict(task="forward", batch_size=1, seq_len=8192, dtype="bf16")),
    ("llama3.1-8b generate bf16", "meta-llama/Llama-3.1-8B",
     dict(task="generate", batch_size=4, seq_len=1024, max_new_tokens=32, dtype="bf16")),
    ("llama3.1-8b train bf16 weights ckpt", "meta-llama/Llama-3.1-8B",
     dict(task="train", batch_size=1, seq_len=2048, dtype="bf16", gradient_checkpointing=True)),
]  # fmt: skip


def main() -> int:
    if not torch.cuda.is_available():
        print("gpu_validation: no CUDA GPU is visible; run it on a GPU machine", file=sys.stderr)
        return 1
    target = cuda_target_name()
    rows = []
    for name, model, options in CASES:
        started = time.perf_counter()
        try:
            result = vramsim.validate(model, device=target, **options)
        except (vramsim.VramsimError, RuntimeError) as exc:  # an OOM on the GPU is a result too
            rows.append({"case": name, "error": str(exc).splitlines()[0]})
            print(f"{name}: {rows[-1]['error']}", file=sys.stderr)
            continue
        row = {"case": name, **result.to_dict(), "seconds": round(time.perf_counter() - started, 1)}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"| case ({target}) | predicted alloc | measured alloc | error | predicted reserved | measured reserved | error |")
    print("|---|---|---|---|---|---|---|")
    gib = 2**30
    for row in rows:
        if "error" in row and "predicted_bytes" not in row:
            print(f"| {row['case']} | failed: {row['error']} | | | | | |")
            continue
        reserved_error = row["predicted_reserved_bytes"] / row["measured_reserved_bytes"] - 1
        print(f"| {row['case']} | {row['predicted_bytes'] / gib:.2f} GiB | {row['measured_bytes'] / gib:.2f} GiB | "
              f"{row['error']:+.2%} | {row['predicted_reserved_bytes'] / gib:.2f} GiB | "
              f"{row['measured_reserved_bytes'] / gib:.2f} GiB | {reserved_error:+.2%} |")  # fmt: skip
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_validation.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
