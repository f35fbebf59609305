"""A long generation derived from two short traces, against the whole generation traced.

    python benchmarks/long_generation.py [--new-tokens 512] [--model meta-llama/Llama-3.1-8B] [--device h100]

Runs ``simulate(task="generate", seq_len=512, ...)`` twice: as it does by default (a head and a
tail probe of five new tokens each, the rest derived, ``vramsim/analysis/generation.py``), then with
derivation switched off (every decode step traced). Prints both times, their ratio, and both
reports' peak, reserved and device bytes, which must be equal to the byte.
"""

from __future__ import annotations

import argparse
import time

import vramsim
from vramsim.analysis import generation


def _timed(model: str, **options: object) -> tuple[float, vramsim.Report]:
    started = time.perf_counter()
    report = vramsim.simulate(model, **options)
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B")
    parser.add_argument("--device", default="h100")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=512)
    args = parser.parse_args()
    options = dict(task="generate", seq_len=args.seq_len, max_new_tokens=args.new_tokens, device=args.device)
    derived_seconds, derived = _timed(args.model, **options)
    generation.DERIVE_ABOVE = args.new_tokens  # trace every decode step
    whole_seconds, whole = _timed(args.model, **options)
    print(f"{args.model} generate, prompt {args.seq_len}, {args.new_tokens} new tokens on {args.device}")
    print(
        f"derived: {derived_seconds:8.1f} s   peak {derived.peak_bytes:,} B  reserved {derived.reserved_bytes:,} B  "
        f"device {derived.device_bytes:,} B"
    )
    print(
        f"whole:   {whole_seconds:8.1f} s   peak {whole.peak_bytes:,} B  reserved {whole.reserved_bytes:,} B  "
        f"device {whole.device_bytes:,} B"
    )
    same = (derived.peak_bytes, derived.reserved_bytes, derived.device_bytes) == (
        whole.peak_bytes,
        whole.reserved_bytes,
        whole.device_bytes,
    )
    print(f"whole / derived time: {whole_seconds / derived_seconds:.1f}x; figures {'equal' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
