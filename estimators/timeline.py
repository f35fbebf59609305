"""The program's allocations and frees in order, derived from the graph.

One timeline feeds every figure of a report: liveness, the breakdown at the peak, the per-layer
table and the allocator replay all read the same events, so they describe the same moments. A
what-if (a checkpointing choice, say) does not re-run the model: it moves frees and adds
allocations in the graph's terms, and a new timeline is derived from that.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import networkx as nx

from vramsim.tracer.graph import storage_nodes

__all__ = ["Block", "Position", "Timeline", "derive_timeline", "order_blocks"]

Position = tuple[int, int, int]
"""Where an event sits: ``(clock, 0, 0)`` is the traced event of that clock; ``(clock, 1, n)``
is the n-th event a what-if placed right after it, before the next traced one; the sharding what-if
places its own after those, at tiers 2-5 (``estimators/sharding/shard.py``)."""


@dataclass(slots=True, kw_only=True)
class Block:
    """One storage on the timeline: a traced one, or one a what-if adds (a recomputed activation)."""

    nbytes: int
    category: str
    module: str
    phase: str
    op: str
    step: int
    alloc_at: Position
    free_at: Position | None
    """``None``: still live at the end of the program."""
    copy_of: int | None = None
    """For a block a what-if adds in the image of a traced storage (a recomputed or fetched activation): its sid."""

    def copy(self) -> Block:
        """A block a what-if may change without touching this one (faster than ``dataclasses.replace``,
        which what-ifs call on every block of a long trace)."""
        return Block(
            nbytes=self.nbytes,
            category=self.category,
            module=self.module,
            phase=self.phase,
            op=self.op,
            step=self.step,
            alloc_at=self.alloc_at,
            free_at=self.free_at,
            copy_of=self.copy_of,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """Events in program order over a table of blocks."""

    blocks: list[Block]
    """By key; traced storages keep their sid as key, added blocks come after."""
    events: list[tuple[int, bool]]
    """``(key, is_alloc)`` in order."""
    preexisting: int
    """The first ``preexisting`` events allocate what existed before tracing (weights, buffers, inputs)."""
    steps: list[tuple[int, int]]
    """``(first, last)`` event index of each step, inclusive; ``first > last`` for an empty step."""


def derive_timeline(
    graph: nx.MultiDiGraph,
    *,
    free_at: Mapping[int, Position | None] | None = None,
    added: Iterable[Block] = (),
    category: Mapping[int, str] | None = None,
) -> Timeline:
    """The graph's timeline, with a what-if's moved frees, re-categorised storages and added blocks."""
    moved = free_at or {}
    recategorised = category or {}
    blocks: list[Block] = []
    for sid, attrs in storage_nodes(graph):
        assert sid == len(blocks), "storage nodes must be numbered 0..n-1 in order"
        blocks.append(
            Block(
                nbytes=attrs["nbytes"],
                category=recategorised.get(sid, attrs["category"]),
                module=attrs["module"],
                phase=attrs["phase"],
                op=attrs["op"],
                step=attrs["step"],
                alloc_at=attrs["alloc_at"],
                free_at=moved[sid] if sid in moved else attrs["free_at"],
            )
        )
    blocks.extend(added)
    return order_blocks(blocks, graph.graph["step_clocks"])


def order_blocks(blocks: list[Block], step_clocks: list[tuple[int, int]]) -> Timeline:
    """The timeline of ``blocks`` (keyed by index), their events sorted by position; a what-if
    that changes blocks of another timeline (sharding) orders them again here."""
    # (clock, tier, seq, 0 for an allocation / 1 for a free, key): a plain tuple sort puts an allocation
    # before a free at the same position, and ties in key order.
    placed = [(*block.alloc_at, 0, key) for key, block in enumerate(blocks)]
    placed += [(*block.free_at, 1, key) for key, block in enumerate(blocks) if block.free_at is not None]
    placed.sort()
    steps = []
    for first_clock, last_clock in step_clocks:
        first = bisect_left(placed, (first_clock, 0, 0))
        last = bisect_left(placed, (last_clock + 1, 0, 0)) - 1  # what-ifs place events after a clock
        steps.append((first, last))
    preexisting = bisect_left(placed, (1, 0, 0))
    return Timeline(blocks=blocks, events=[(item[4], item[3] == 0) for item in placed], preexisting=preexisting, steps=steps)
