"""A sweep of 1,000 (batch, seq) points for Llama-3.1-70B on an H100, timed, then 20 of its points re-traced whole and
compared to the byte (run by hand: ``python benchmarks/sweep_70b.py``; its output is in docs/sweep.md)."""

from __future__ import annotations

import time

import vramsim

MODEL = "meta-llama/Llama-3.1-70B"
BATCHES = "1:40"
LENGTHS = "1024:25600:1024"
CHECKED = 20


def main() -> None:
    started = time.perf_counter()
    found = vramsim.sweep(MODEL, batch_size=BATCHES, seq_len=LENGTHS, device="h100", task="train")
    seconds = time.perf_counter() - started
    derived = sum(point.answer == "derived" for point in found.points)
    print(f"{len(found.points)} points in {seconds:.1f} s: {found.traces} traced, {derived} derived")
    same = 0
    stride = 51  # coprime with the 25 lengths: the points checked lie across both axes
    for point in [found.points[(12 + i * stride) % len(found.points)] for i in range(CHECKED)]:
        report = vramsim.simulate(
            MODEL, task="train", batch_size=point.batch_size, seq_len=point.seq_len, device="h100", advice="none"
        )
        figures = (report.peak_bytes, report.reserved_bytes, report.device_bytes, report.fits)
        equal = figures == (point.peak_bytes, point.reserved_bytes, point.device_bytes, point.fits)
        same += equal
        print(
            f"  batch {point.batch_size:>2} seq {point.seq_len:>5} ({point.answer}): {point.peak_bytes:,} B peak, "
            f"{point.device_bytes:,} B on the device; re-traced {'equal' if equal else f'DIFFERENT {figures}'}"
        )
    print(f"{same} of {CHECKED} re-traced points equal to the byte")


if __name__ == "__main__":
    main()
