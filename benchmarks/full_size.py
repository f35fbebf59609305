"""How long an architecture's full-size default config takes to trace a training step.

    python benchmarks/full_size.py [MODEL_TYPE ...]   # default: longcat_flash rwkv zamba

The coverage sweep (``tests/coverage/test_architectures.py``) caps each default config at two layers; this
traces the default config whole (every layer, ``architectures.small_config(..., capped=False)``), at the
sweep's batch, length and target, one architecture at a time, and prints its wall and CPU seconds against
the issue's bar of 60 s. CPU seconds are the figure to compare on a shared machine. The three defaults are
the ones that passed 60 s; RWKV and Zamba run transformers' reference loop over the sequence (its CUDA kernels
need packages a plain install lacks: ``kernels``, ``mamba_ssm``), which is what their users run without them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "coverage"))
import architectures  # the sweep's own configs and repairs

BAR_SECONDS = 60
SLOW = ("longcat_flash", "rwkv", "zamba")


def main() -> None:
    torch.set_num_threads(1)  # as the sweep's workers
    wanted = sys.argv[1:] or list(SLOW)
    cases = {case[1]: case for case in architectures.cases() if case[1] in wanted}
    for model_type in wanted:
        mapping, _, class_name, target = cases[model_type]
        wall, cpu = time.perf_counter(), time.process_time()
        report = architectures.trace(model_type, class_name, target, mapping, capped=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        verdict = "within" if wall <= BAR_SECONDS else "over"
        print(
            f"{model_type:16s} {target:5s} {report.parameters:>16,} parameters  wall {wall:6.1f} s  cpu {cpu:6.1f} s  "
            f"({verdict} {BAR_SECONDS} s)"
        )


if __name__ == "__main__":
    main()
