"""What the strategy search costs beside one trace of the same model.

    python benchmarks/fit_sweep.py [--gpus 32] [--model meta-llama/Llama-3.1-70B]

Traces Llama-3.1-70B (train, bf16 autocast, seq 4096, h100) once and times it, then runs
``vramsim fit --strategies`` over up to ``--gpus`` GPUs (``vramsim.cheapest_strategy``: tensor, pipeline
and data-parallel layouts, every checkpointing choice, one trace per tensor-parallel degree it needs) and
prints the settings it measured, the traces it made, its time and the ratio to the one trace. The issue's
bar: 50 settings or more in less than 10 x one trace (a trace per setting would be 50 x).
"""

from __future__ import annotations

import argparse
import time

from vramsim.analysis.traced import build_and_trace
from vramsim.config import SimulationConfig
from vramsim.search.strategy import cheapest_strategy
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

OPTIONS = {"task": "train", "seq_len": 4096, "device": "h100", "dtype": "fp32", "mixed_precision": "bf16"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="meta-llama/Llama-3.1-70B")
    parser.add_argument("--gpus", type=int, default=32)
    args = parser.parse_args()
    config = SimulationConfig.from_options(**OPTIONS)
    started = time.perf_counter()
    _, _, trace = build_and_trace(args.model, config, resolve_target(config.device), checkpointing="marked")
    build_graph(trace)
    traced = time.perf_counter() - started
    started = time.perf_counter()
    search = cheapest_strategy(args.model, gpus=args.gpus, **OPTIONS)
    swept = time.perf_counter() - started
    best = search.cheapest
    answer = "none fits" if best is None else " ".join(f"--{k.replace('_', '-')} {v}" for k, v in best.options().items())
    print(f"cheapest: {answer}")
    print(
        f"one trace: {traced:.1f} s   search: {len(search.candidates)} settings measured ({search.skipped} skipped) "
        f"from {search.traces} traces in {swept:.1f} s   ratio {swept / traced:.2f} "
        f"(a trace per setting would be about {len(search.candidates)}.0)"
    )


if __name__ == "__main__":
    main()
