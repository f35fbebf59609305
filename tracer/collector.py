"""Python's cyclic garbage collector paused while vramsim makes many small objects beside a large heap."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector, then restore it as it was.

    A trace, its graph and a what-if each make hundreds of thousands of records, blocks and events beside a model of
    hundreds of thousands of objects; every full collection rescans them all (a tenth of a trace's time, a
    third of a 70B sweep's). Reference counting still frees what holds no cycle, which is every tensor a
    program drops: a storage's free is its refcount reaching zero, as on the device. A collection inside a
    trace could only free a tensor caught in a cycle, at a moment set by the collector's thresholds rather
    than by the program; the CPU ground truth runs with the collector paused for the same reason
    (``vramsim/validation/measure.py``), so a trace now sees what that run sees."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
