"""A sweep of 1,000 (batch, seq) points for Llama-3.1-70B on an H100, timed, then 20 of its points re-traced whole and
compared to the byte (run by hand: ``python benchmarks/sweep_70b.py``; its output is in docs/sweep.md).

The sweep skips the result cache (a second run would answer from it in no time); the re-traces run two at a time
in worker processes, each ``vramsim.simulate`` of its own point, uncached."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable

from joblib import Parallel, delayed

import vramsim

MODEL = "meta-llama/Llama-3.1-70B"
BATCHES = "1:40"
LENGTHS = "1024:25600:1024"
CHECKED = 20
STRIDE = 51
"""Between the points re-traced: coprime with the 25 lengths, so that they lie across both axes."""


def _retraced(batch_size: int, seq_len: int) -> tuple[int, int, int, bool | None]:
    report = vramsim.simulate(
        MODEL, task="train", batch_size=batch_size, seq_len=seq_len, device="h100", advice="none", cache=False
    )
    return report.peak_bytes, report.reserved_bytes, report.device_bytes, report.fits


def _cpu_seconds() -> float:
    """This process's and its finished children's CPU time (user + system)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _told(started: float) -> Callable[[str, int, int], None]:
    """Each stage's progress on stderr, a line per trace and per hundred points answered."""

    def told(stage: str, done: int, total: int) -> None:
        if stage == "tracing" or done % 100 == 0 or done == total:
            print(f"  {time.perf_counter() - started:7.1f} s  {stage} {done}/{total}", file=sys.stderr, flush=True)

    return told


def main() -> None:
    started, cpu = time.perf_counter(), _cpu_seconds()
    found = vramsim.sweep(
        MODEL, batch_size=BATCHES, seq_len=LENGTHS, device="h100", task="train", cache=False, progress=_told(started)
    )
    seconds = time.perf_counter() - started
    derived = sum(point.answer == "derived" for point in found.points)
    print(
        f"{len(found.points)} points in {seconds:.1f} s ({_cpu_seconds() - cpu:.1f} s of CPU): "
        f"{found.traces} traced, {derived} derived",
        flush=True,
    )
    checked = [found.points[(12 + i * STRIDE) % len(found.points)] for i in range(CHECKED)]
    again = Parallel(n_jobs=2, return_as="generator")(delayed(_retraced)(p.batch_size, p.seq_len) for p in checked)
    same = 0
    for point, figures in zip(checked, again, strict=True):
        equal = figures == (point.peak_bytes, point.reserved_bytes, point.device_bytes, point.fits)
        same += equal
        print(
            f"  batch {point.batch_size:>2} seq {point.seq_len:>5} ({point.answer}): {point.peak_bytes:,} B peak, "
            f"{point.device_bytes:,} B on the device; re-traced {'equal' if equal else f'DIFFERENT {figures}'}",
            flush=True,
        )
    print(f"{same} of {CHECKED} re-traced points equal to the byte")


if __name__ == "__main__":
    main()
