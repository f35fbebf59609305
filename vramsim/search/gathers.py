"""What ZeRO-3 and FSDP2 hold beyond a rank program's own tensors, moment by moment: the lower bound's terms for
their gathered weights and reduce-scatter inputs (``bounds.TracedBound``).

They follow the windows ``estimators/sharding/windows.py`` places around each block (the graph's ``units``) and the
root, taking of each window only a part it surely spans, strictly between two clocks of the traced program:

- FSDP2 (both): the root's unsharded weights from the first block's forward to the root's last gradient (the root
  group is gathered from the step's first clock to its backward's end); the reduce-scatter input of a block (its
  whole gradients), from that block's last gradient to the next block's, in the order their backwards end;
- FSDP2 full (``reshard_after_forward=True``): a block's unsharded weights during its forward (first to last clock
  of the call) and its backward (the clock before its first saved-tensor read, or its first gradient, to its last
  gradient);
- FSDP2 grad-op (``reshard_after_forward=False``): a block's unsharded weights from its forward's first clock to
  its backward's last gradient: at the end of forward every block is gathered at once;
- ZeRO-3: FSDP2 full's windows for the weights DeepSpeed partitions (``stage3_param_persistence_threshold``
  elements or more), root included; its gradients go to flat partitions made at start-up, not counted here, and
  its reduce bucket lives for the run (``FloorBound.held_bytes`` counts it);
- ZeRO-1 and ZeRO-2: the reduce bucket (``reduce_bucket_size`` elements of the gradients' dtype), from the first
  gradient ready in backward to the last.

A weight is counted at the narrower of its traced width and the autocast width (FSDP2 gathers the weights autocast
casts in its dtype, DeepSpeed's bf16/fp16 mode holds them in it), unpadded (FSDP2 pads its shards, which only adds).
A block's tensors scale with tensor parallelism as its activations do (heads and MLP split, norms whole), so the
terms join the ``other`` bytes of a sweep, not divided by context parallelism: weights hold no tokens. Steps with
gradient accumulation, whose windows repeat per micro-step, get no terms (zero: the bound stays sound, only looser).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import networkx as nx
import numpy as np

from vramsim.estimators.sharding.plan import itemsize
from vramsim.estimators.sharding.rank import Weight
from vramsim.estimators.sharding.windows import block_groups
from vramsim.tracer.graph import saved_edges, storage_nodes

__all__ = ["HOLDING_SCHEMES", "Windows", "gather_windows", "held_by_row"]

HOLDING_SCHEMES = ("FSDP2 full", "FSDP2 grad-op", "ZeRO-3", "ZeRO-1", "ZeRO-2")
"""The schemes whose libraries hold weights or buffers beyond the traced tensors during a step."""

Windows = dict[str, list[tuple[int, int, int]]]
"""By scheme: ``(after, before, bytes)``, bytes held at every clock strictly between ``after`` and ``before``."""


def gather_windows(
    graph: nx.MultiDiGraph, *, autocast_itemsize: int | None, persistence_threshold: int, bucket_bytes: int
) -> Windows:
    """The last step's windows of what each scheme holds beyond the traced tensors (the module's docstring), with
    DeepSpeed's reduce bucket of ``bucket_bytes``; empty lists where the step has no gradients or runs several
    micro-steps."""
    empty: Windows = {scheme: [] for scheme in HOLDING_SCHEMES}
    units = graph.graph["units"]
    last = max((unit.step for unit in units), default=-1)
    calls = [(index, unit) for index, unit in enumerate(units) if unit.step == last]
    if not calls or len({unit.module for _, unit in calls}) < len(calls):  # none, or gradient accumulation
        return empty
    attrs = [a for _, a in storage_nodes(graph)]
    weights = {
        a["owner"]: Weight(sid, a["owner"], tuple(a["shape"]), a["nbytes"])
        for sid, a in enumerate(attrs)
        if a["category"] == "parameters" and a["owner"]
    }
    ready = {
        a["owner"]: (a["alloc_at"][0], a["nbytes"])
        for a in attrs
        if a["category"] == "gradients" and a["step"] == last and a["owner"] in weights
    }
    if not ready:
        return empty
    groups = block_groups([unit.module for _, unit in calls], weights.values())
    unpacks: dict[int, list[int]] = defaultdict(list)
    for _, _, hold in saved_edges(graph):
        if hold["unit"] is not None and hold["unpack_clock"] is not None:
            unpacks[hold["unit"]].append(hold["unpack_clock"])

    def gathered(module: str, *, partitioned: bool) -> int:
        return sum(
            (w.nbytes // itemsize(attrs[w.sid])) * min(itemsize(attrs[w.sid]), autocast_itemsize or itemsize(attrs[w.sid]))
            for w in groups.get(module, [])
            if not partitioned or w.numel >= persistence_threshold
        )

    def gradients(module: str) -> list[int]:
        return [ready[w.name][0] for w in groups.get(module, []) if w.name in ready]

    end_of_backward = max(clock for clock, _ in ready.values())
    start = min(unit.first_clock for _, unit in calls)
    root_end = max(gradients(""), default=end_of_backward)
    windows: Windows = {
        "FSDP2 full": [(start, root_end, gathered("", partitioned=False))],
        "FSDP2 grad-op": [(start, root_end, gathered("", partitioned=False))],
        "ZeRO-3": [(start, root_end, gathered("", partitioned=True))],
        "ZeRO-1": [(min(clock for clock, _ in ready.values()), end_of_backward, bucket_bytes)],
    }
    windows["ZeRO-2"] = windows["ZeRO-1"]
    ends: list[tuple[int, str]] = []  # each group's backward end, for the reduce-scatter inputs
    for index, unit in calls:
        clocks, reads = gradients(unit.module), unpacks.get(index, [])
        whole, partitioned = gathered(unit.module, partitioned=False), gathered(unit.module, partitioned=True)
        windows["FSDP2 full"].append((unit.first_clock, unit.last_clock, whole))
        windows["ZeRO-3"].append((unit.first_clock, unit.last_clock, partitioned))
        if not clocks:
            continue
        first = max((min(reads) if reads else min(clocks)) - 1, unit.last_clock)
        windows["FSDP2 full"].append((first, max(clocks), whole))
        windows["ZeRO-3"].append((first, max(clocks), partitioned))
        windows["FSDP2 grad-op"].append((unit.first_clock, max(clocks), whole))
        ends.append((max(clocks), unit.module))
    if gradients(""):
        ends.append((root_end, ""))
    ends.sort()
    for (end, module), (following, _) in pairwise(ends):
        reduced = sum(ready[w.name][1] for w in groups.get(module, []) if w.name in ready)
        for scheme in ("FSDP2 full", "FSDP2 grad-op"):
            windows[scheme].append((end, following, reduced))
    return windows


def held_by_row(windows: list[tuple[int, int, int]], clocks: np.ndarray) -> np.ndarray:
    """Bytes ``windows`` hold after each event at ``clocks`` (non-decreasing); zeros where they are not in order."""
    held = np.zeros(len(clocks) + 1, dtype=np.float64)
    if len(clocks) and np.any(np.diff(clocks) < 0):
        return held[:-1]
    for after, before, nbytes in windows:
        if before - after < 2 or not nbytes:
            continue
        low = np.searchsorted(clocks, after, side="right")
        high = np.searchsorted(clocks, before, side="left")
        held[low] += nbytes
        held[high] -= nbytes
    return np.cumsum(held)[:-1]
