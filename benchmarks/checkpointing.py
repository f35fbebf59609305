"""What the checkpointing what-ifs cost beside the trace they are computed from.

    python benchmarks/checkpointing.py

Traces Llama-3.1-8B (train, bf16 autocast, seq 8192, h100) once, then computes every
``--checkpointing`` choice from its graph, and prints both times and their ratio. A re-trace per
choice would cost about one trace each.
"""

from __future__ import annotations

import time

from vramsim.analysis.traced import build_and_trace
from vramsim.analysis.whatifs import Analysis
from vramsim.config import SimulationConfig
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

CHOICES = ("none", "full", "every:2", "selective", "offload")


def main() -> None:
    config = SimulationConfig(task="train", seq_len=8192, device="h100", dtype="fp32", mixed_precision="bf16")
    target = resolve_target(config.device)
    started = time.perf_counter()
    _, _, trace = build_and_trace("meta-llama/Llama-3.1-8B", config, target, checkpointing="marked")
    traced = time.perf_counter() - started
    started = time.perf_counter()
    analysis = Analysis(build_graph(trace), target, config)
    peaks = {spec: analysis.run(parse_checkpointing(spec)).memory.peak_bytes for spec in CHOICES}
    analysed = time.perf_counter() - started
    for spec, peak in peaks.items():
        print(f"{spec:<10} peak {peak / 2**30:8.2f} GiB")
    print(
        f"trace: {traced:.2f} s   graph + {len(CHOICES)} what-ifs with allocator replays: {analysed:.2f} s   "
        f"ratio {analysed / traced:.2f} (a re-trace per choice would be about {len(CHOICES)}.0)"
    )


if __name__ == "__main__":
    main()
