"""vramsim against published multi-GPU training memory figures (per rank).

The cases use ``published_gpu``'s machinery (``Case``, the runner, the table). The source is
torchtitan's benchmark of December 2024 (``benchmarks/llama3_h100_202412_torchtitan.md`` in the
torchtitan repository): Llama 3.1 8B, 70B and 405B trained with FSDP2 and up to 4D parallelism on
H100s with 96 GB of HBM2e, each table giving the memory torchtitan logs, its ``memory:`` line,
``torch.cuda.memory_stats()["reserved_bytes.all.peak"]`` (the maximum over ranks).

torchtitan trains its own Llama modules; vramsim traces transformers' ``LlamaForCausalLM``, whose
ops are the same (bf16 matmuls through SDPA, fp32 logits into cross-entropy). The rows that use
Float8 training, context parallelism or torch.compile with activation checkpointing are listed
with vramsim's own refusal or the reason they cannot be written as options.

Run: ``python benchmarks/published_multi_gpu.py`` (about two minutes on two cores);
``--only SUBSTRING`` runs the matching cases.
"""

from __future__ import annotations

from typing import Any

from published_gpu import Case, run_cases

GiB = 2**30

_TORCHTITAN = "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md"
_TORCHTITAN_STACK = (
    "torchtitan 9dec370, torch 1963fc8 (2024-12-23), H100 96GB HBM2e (Grand Teton); FSDP2 fully_shard per "
    "TransformerBlock and the root, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), fused AdamW, "
    "seq_len 8192, op-level selective AC (every second matmul recomputed); memory: = max reserved_bytes.all.peak"
)
_H100_96GB = "custom:96GB:sm_90"
"""The Grand Teton H100 with 96 GB of HBM2e is not a catalog GPU: given as its memory and architecture."""
_FLOAT8 = "Float8 training (torchao convert_to_float8_training, float8 all-gather) is not modelled"
_CP = "context parallel (ring attention over a sequence split across ranks) is not modelled"

_TITAN_8B: dict[str, Any] = dict(
    task="train",
    batch_size=2,
    seq_len=8192,
    dtype="fp32",  # torchtitan builds the model in fp32; FSDP2's MixedPrecisionPolicy gathers bf16
    mixed_precision="bf16",
    fsdp="full",
    checkpointing="selective:torchtitan",
)


def _titan(
    name: str, quote: str, gib: float, *, model: str = "meta-llama/Llama-3.1-8B", unavailable: str | None = None, **options: Any
) -> Case:
    return Case(
        f"torchtitan {name}",
        _TORCHTITAN,
        quote,
        _TORCHTITAN_STACK,
        _H100_96GB,
        model,
        {**_TITAN_8B, **options},
        "reserved",
        round(gib * GiB),
        unavailable,
    )


CASES = [
    _titan("8B FSDP 8 GPUs", "Table 1 ... 8 GPUs. Local batch size 2 ... Selective activation checkpointing. "
           "| FSDP | 5,762 | 82.4 |", 82.4, gpus=8),
    _titan("8B FSDP 128 GPUs", "Table 3 ... 128 GPUs. Local batch size 2 ... Selective activation checkpointing. "
           "| FSDP | 5,605 | 67.0 |", 67.0, gpus=128),
    _titan("8B FSDP + compile 8 GPUs", "Table 1 ... | FSDP + torch.compile | 6,667 | 77.0 |", 77.0, gpus=8,
           compile=True),
    _titan("8B FSDP + compile 128 GPUs", "Table 3 ... | FSDP + torch.compile | 6,514 | 62.0 |", 62.0, gpus=128,
           compile=True),
    _titan("8B FSDP + compile + Float8 8 GPUs", "Table 1 ... | FSDP + torch.compile + Float8 | 8,532 | 76.8 |", 76.8,
           gpus=8, unavailable=_FLOAT8),
    _titan("8B FSDP 4 CP 2 seq 65536", "Table 2 ... Local batch size 1. Full activation checkpointing. "
           "| FSDP 4, CP 2 | 65536 | 2,540 | 84.2 |", 84.2, gpus=8, batch_size=1, seq_len=65536, checkpointing="full",
           unavailable=_CP),
    _titan("70B FSDP 32 TP 8", "Table 4 ... 256 GPUs (FSDP 32, TP 8). Local batch size 16 ... Full activation "
           "checkpointing. | 2D | 829 | 71.9 |", 71.9, model="meta-llama/Llama-3.1-70B", gpus=256, tp=8, batch_size=16,
           checkpointing="full", unavailable=_FLOAT8),
]  # fmt: skip


if __name__ == "__main__":
    run_cases(CASES, __doc__)
