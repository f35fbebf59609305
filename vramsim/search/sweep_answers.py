"""A sweep's points answered from their structure's timeline: independent replays, in local worker processes.

Once a structure's first point has been analysed whole, each other point of it (where ``Analysis.replays_resized``)
is that what-if's timeline replayed with the point's own blocks' bytes: one caching-allocator replay of tens of
thousands of events a point, and the points' replays are independent. They run in ``jobs`` local processes
(joblib), each process a chunk of points with the timeline sent once. They run this installation's code on this
machine, whatever backend traced the points, and only figures come back: an answer is the one the driver's own
process would give (``tests/search/test_sweep.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from vramsim.analysis.device_memory import MemoryFigures, TimelineReplay
from vramsim.search.sweep_workers import in_processes

__all__ = ["CHUNKS_PER_JOB", "ReplayChunk", "replay_chunk", "replay_chunks", "run_replays"]

CHUNKS_PER_JOB = 4
"""Chunks each process gets of a stage's points: enough that one slow chunk does not hold the others up, few enough
that the timeline (a few MB pickled) is sent a handful of times."""


@dataclass(frozen=True, slots=True)
class ReplayChunk:
    """Points replayed on one timeline: each point's ``values`` (its fit's distinct values, or its own quantities),
    every block's bytes picked from them by ``picked``."""

    replay: TimelineReplay
    picked: np.ndarray
    values: list[list[int]]


def replay_chunk(chunk: ReplayChunk) -> list[MemoryFigures]:
    """A process's job: every point of the chunk replayed (exact integers: the bytes picked as Python ints)."""
    return [chunk.replay.figures(np.asarray(values, dtype=object)[chunk.picked].tolist()) for values in chunk.values]


def replay_chunks(
    replay: TimelineReplay,
    picked: np.ndarray,
    values: Sequence[list[int]],
    *,
    jobs: int | None,
) -> list[ReplayChunk]:
    """``values``' points in chunks for ``jobs`` processes (``CHUNKS_PER_JOB`` each), in order."""
    workers = jobs or os.cpu_count() or 1
    size = max(1, -(-len(values) // (workers * CHUNKS_PER_JOB)))
    return [ReplayChunk(replay, picked, list(values[i : i + size])) for i in range(0, len(values), size)]


def run_replays(chunks: Sequence[ReplayChunk], *, jobs: int | None, told: Callable[[int], None]) -> list[list[MemoryFigures]]:
    """Each chunk's figures, in order; ``told(points)`` as each chunk returns. ``jobs=1``, or a single chunk: in
    this process; the chunks of a process that dies are replayed in this one."""
    workers = min(jobs or os.cpu_count() or 1, len(chunks))
    figures = in_processes(replay_chunk, chunks, workers, lambda replayed: told(len(replayed))) if workers > 1 else {}
    for index in [i for i in range(len(chunks)) if i not in figures]:  # in this process, or lost with a dead one
        figures[index] = replay_chunk(chunks[index])
        told(len(figures[index]))
    return [figures[index] for index in range(len(chunks))]
