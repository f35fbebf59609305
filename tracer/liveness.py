"""Liveness over the graph: live bytes at every clock and every op, and the peak of a window."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import networkx as nx

from .categories import Category

__all__ = ["Liveness", "live_storages", "liveness"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Liveness:
    """Live bytes over the event clock of one graph."""

    live_by_clock: list[int]
    """``live_by_clock[c]``: bytes live right after event clock ``c`` (clock 0 = before tracing)."""
    op_clocks: list[int]
    """Clock right after each op's allocations, by op index."""

    def live_at_op(self, index: int) -> int:
        return self.live_by_clock[self.op_clocks[index]]

    def peak(self, first_clock: int = 0, last_clock: int | None = None) -> tuple[int, int]:
        """``(peak_bytes, clock)`` over the clocks of a window, inclusive; the earliest clock wins."""
        last = len(self.live_by_clock) - 1 if last_clock is None else last_clock
        window = self.live_by_clock[first_clock : last + 1]
        best = max(range(len(window)), key=window.__getitem__)
        return window[best], first_clock + best


def liveness(graph: nx.DiGraph) -> Liveness:
    """A storage is live from its allocation clock until its free clock (forever if never freed)."""
    last_clock: int = graph.graph["last_clock"]
    delta = [0] * (last_clock + 2)
    op_clocks: dict[int, int] = {}
    for (kind, index), attrs in graph.nodes(data=True):
        if kind == "op":
            op_clocks[index] = attrs["clock_after"]
            continue
        delta[attrs["alloc_clock"]] += attrs["nbytes"]
        if attrs["free_clock"] is not None:
            delta[attrs["free_clock"]] -= attrs["nbytes"]
    live = list(accumulate(delta[: last_clock + 1]))
    return Liveness(live_by_clock=live, op_clocks=[op_clocks[i] for i in range(len(op_clocks))])


def live_storages(graph: nx.DiGraph, clock: int) -> list[tuple[int, int, Category]]:
    """``(sid, nbytes, category)`` of every storage live right after ``clock``."""
    return [
        (index, attrs["nbytes"], attrs["category"])
        for (kind, index), attrs in graph.nodes(data=True)
        if kind == "storage"
        and attrs["alloc_clock"] <= clock
        and (attrs["free_clock"] is None or attrs["free_clock"] > clock)
    ]
