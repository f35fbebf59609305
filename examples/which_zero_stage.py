"""Which ZeRO stage or FSDP setting lets a 70B full fine-tune fit on 8 H100s?

Llama-3.1-70B in bf16 mixed precision (fp32 master weights and AdamW states, bf16 compute), full
activation checkpointing, one sequence of 4,096 tokens per GPU. One trace; every data-parallel
setting, and every cluster size, is computed from its graph (``vramsim.simulate_each``). ZeRO runs
DeepSpeed's bf16 mode (bf16 weights and gradients, fp32 master and optimizer partitions), FSDP2 its
MixedPrecisionPolicy (fp32 shards gathered in bf16), DDP torch.autocast.
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes

SETTINGS = {
    "DDP": {},
    "ZeRO-1": {"zero": 1},
    "ZeRO-2": {"zero": 2},
    "ZeRO-3": {"zero": 3},
    "FSDP2 full": {"fsdp": "full"},
    "FSDP2 grad-op": {"fsdp": "grad-op"},
}
CLUSTERS = (8, 16, 32, 64)


def main() -> None:
    runs = [(gpus, name) for gpus in CLUSTERS for name in SETTINGS]
    variants = [{"gpus": gpus, **SETTINGS[name]} for gpus, name in runs]
    reports = vramsim.simulate_each(
        "meta-llama/Llama-3.1-70B",
        variants,
        advice="none",
        task="train",
        seq_len=4096,
        device="h100",
        dtype="fp32",
        mixed_precision="bf16",
        checkpointing="full",
    )
    by_setting = dict(zip(runs, reports, strict=True))
    print(f"{'setting':<14} {'GPUs':>4} {'model states':>13} {'peak':>11} {'on device':>11} {'fits':>5}")
    for (gpus, name), report in by_setting.items():
        if gpus != 8 and name not in ("ZeRO-3", "FSDP2 full"):
            continue
        states = sum(report.ranks.model_state.values()) if report.ranks else 0
        print(
            f"{name:<14} {gpus:>4} {format_bytes(states):>13} {format_bytes(report.peak_bytes):>11} "
            f"{format_bytes(report.device_bytes):>11} {'yes' if report.fits else 'no':>5}"
        )
    on_eight = [(name, r) for (gpus, name), r in by_setting.items() if gpus == 8 and r.fits]
    if on_eight:
        name, best = min(on_eight, key=lambda item: item[1].device_bytes)
        print(f"Answer: {name} fits 8 H100s ({format_bytes(best.device_bytes)} per GPU).")
        return
    fitting = [(gpus, name, r) for (gpus, name), r in by_setting.items() if r.fits]
    least = min((r for (gpus, _), r in by_setting.items() if gpus == 8), key=lambda r: r.device_bytes)
    scheme = least.ranks.scheme if least.ranks else "?"
    if not fitting:
        where = f"not even {CLUSTERS[-1]} H100s fit"
    else:
        fewest = min(gpus for gpus, _, _ in fitting)
        names = sorted(((r.device_bytes, name) for gpus, name, r in fitting if gpus == fewest))
        where = f"the fewest H100s that fit are {fewest}, with " + " or ".join(
            f"{name} ({format_bytes(nbytes)} per GPU)" for nbytes, name in names
        )
    print(f"Answer: no setting fits on 8 H100s (the least, {scheme}, needs {format_bytes(least.device_bytes)} per GPU); {where}.")


if __name__ == "__main__":
    main()
