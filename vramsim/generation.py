"""Long generations from two short traces (``estimators/decode.py``), or one whole trace where they cannot be.

A generation of more than ``DERIVE_ABOVE`` new tokens is traced twice with ``TRACED_NEW_TOKENS``
new tokens: once with the real prompt (the head) and once with a prompt as long as the last
decode steps see (the tail probe). The timeline of the whole generation is derived from them. A
model whose decode steps are not alike, an encoder-decoder (its tail probe would lengthen the
encoder), or several ranks is traced whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import networkx as nx

from vramsim.estimators.decode import DecodeRun, derive_generation
from vramsim.estimators.timeline import Timeline, derive_timeline

from .config import SimulationConfig
from .report import Assumption

__all__ = ["DERIVE_ABOVE", "TRACED_NEW_TOKENS", "Generation", "derive", "derives", "head_config", "tail_config"]

TRACED_NEW_TOKENS = 5
"""New tokens each short run generates: a prefill and four decode steps (the template is read from
steps 2-4, since step 1 frees the prefill's cache)."""

DERIVE_ABOVE = 16
"""Generations of more new tokens than this are derived; shorter ones are traced whole (as fast)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """A derived generation: the timeline that stands for the whole trace, and what the report says of it."""

    timeline: Timeline
    note: Assumption


def derives(config: SimulationConfig) -> bool:
    """Whether ``config``'s generation is long enough to derive, on one rank."""
    return config.task == "generate" and (config.max_new_tokens or 0) > DERIVE_ABOVE and config.gpus == 1


def head_config(config: SimulationConfig) -> SimulationConfig:
    """The head: the real prompt, ``TRACED_NEW_TOKENS`` new tokens."""
    return dataclasses.replace(config, max_new_tokens=TRACED_NEW_TOKENS)


def tail_config(config: SimulationConfig) -> SimulationConfig:
    """The tail probe: its decode steps see the token counts of the generation's last ones."""
    longer = config.seq_len + (config.max_new_tokens or 0) - TRACED_NEW_TOKENS
    return dataclasses.replace(config, seq_len=longer, max_new_tokens=TRACED_NEW_TOKENS)


def derive(head: nx.MultiDiGraph, tail: nx.MultiDiGraph, new_tokens: int) -> Generation:
    """The whole generation from the two short runs' graphs; ``ValueError`` when they cannot give it."""
    runs = [
        DecodeRun(derive_timeline(graph), graph.graph["decode_clocks"], first)
        for graph, first in ((head, 1), (tail, new_tokens - TRACED_NEW_TOKENS + 1))
    ]
    timeline = derive_generation(runs[0], runs[1], new_tokens)
    last = TRACED_NEW_TOKENS - 1
    note = Assumption(
        name="decode_steps_derived",
        detail=f"decode steps 1-{last} and {new_tokens - last}-{new_tokens - 1} are traced (two short runs); the others "
        "repeat them, each tensor's bytes on the line the first ones draw, capped where the last ones stop growing "
        "(a sliding-window cache, a kernel's fixed split)",
    )
    return Generation(timeline, note)
