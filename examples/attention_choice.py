"""Eager, SDPA or flash-attn 2 for a Llama-3.2-1B full fine-tune on one A100-80GB, at 4k and 16k tokens?

bf16 weights, AdamW, one sequence per step, no activation checkpointing. Eager attention keeps
softmax's float32 probabilities and their bf16 copy, (heads, seq, seq) each per layer, so its memory
grows with the square of the sequence; SDPA (flash on an A100) and flash-attn 2 keep the output
and a float32 log-sum-exp per token. The attention kernel decides what the trace holds, so each
choice is its own trace (``attn_implementation`` is passed to transformers as ``from_pretrained``
passes it).
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

KERNELS = ("eager", "sdpa", "flash_attention_2")
LENGTHS = (4096, 16384)


def main() -> None:
    print(f"{'attention':<18} {'tokens':>6} {'peak':>11} {'on device':>11} {'fits':>5}")
    fitting: dict[int, list[tuple[int, str]]] = {length: [] for length in LENGTHS}
    for length in LENGTHS:
        for kernel in KERNELS:
            report = vramsim.simulate(
                "meta-llama/Llama-3.2-1B",
                task="train",
                seq_len=length,
                device="a100-80gb",
                dtype="bf16",
                attn_implementation=kernel,
            )
            if report.fits:
                fitting[length].append((report.device_bytes, kernel))
            print(
                f"{kernel:<18} {length:>6} {format_bytes(report.peak_bytes):>11} "
                f"{format_bytes(report.device_bytes):>11} {'yes' if report.fits else 'no':>5}"
            )
    answers = []
    for length, options in fitting.items():
        if options:
            nbytes, kernel = min(options)
            fits = ", ".join(kernel for _, kernel in sorted(options))
            answers.append(f"at {length} tokens {fits} fit (least: {kernel}, {format_bytes(nbytes)})")
        else:
            answers.append(f"at {length} tokens nothing fits")
    print("Answer: " + "; ".join(answers) + ".")


if __name__ == "__main__":
    main()
