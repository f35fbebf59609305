"""Long generations from two short traces (``estimators/decode.py``), or one whole trace where they cannot be.

A generation of more than ``DERIVE_ABOVE`` new tokens is traced twice with ``TRACED_NEW_TOKENS``
new tokens: once with the real prompt (the head) and once with a prompt as long as the last
decode steps see (the tail probe; an encoder-decoder's decoder prompt, its encoder input kept). The
timeline of the whole generation is derived from them. A model whose decode steps are not alike
(``ValueError`` from the derivation), or several ranks, is traced whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import torch

from vramsim.config import SimulationConfig
from vramsim.estimators.decode import DecodeRun, derive_generation
from vramsim.estimators.timeline import Timeline, derive_timeline
from vramsim.results.report import Assumption
from vramsim.tracer.data_dependent import seed
from vramsim.workload.program import Program

__all__ = ["DERIVE_ABOVE", "TRACED_NEW_TOKENS", "Generation", "derive", "derives", "head_config", "tail_probe"]

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
    """Whether ``config``'s generation is long enough to derive, on one rank; a static cache is sized by
    the whole generation, which the short runs are not, so it is traced whole."""
    long = config.task == "generate" and (config.max_new_tokens or 0) > DERIVE_ABOVE
    return long and config.gpus == 1 and config.cache_implementation == "dynamic"


def head_config(config: SimulationConfig) -> SimulationConfig:
    """The head: the real prompt, ``TRACED_NEW_TOKENS`` new tokens."""
    return dataclasses.replace(config, max_new_tokens=TRACED_NEW_TOKENS)


def tail_probe(config: SimulationConfig, batch: dict[str, Any]) -> tuple[SimulationConfig, Callable[[Program], None] | None]:
    """The tail probe (its config, and what changes its built program): a prompt whose decode steps
    see the token counts of the generation's last ones. ``batch`` is the head's: an encoder-decoder
    keeps its encoder input and gets a longer decoder prompt."""
    extra = (config.max_new_tokens or 0) - TRACED_NEW_TOKENS
    short = dataclasses.replace(config, max_new_tokens=TRACED_NEW_TOKENS)
    if "decoder_input_ids" not in batch:
        return dataclasses.replace(short, seq_len=config.seq_len + extra), None
    decoder = batch["decoder_input_ids"]
    if decoder.dim() != 2:
        raise ValueError("no tail probe for a decoder prompt of audio codes in channels")
    shape = (decoder.shape[0], decoder.shape[1] + extra)

    def longer_decoder_prompt(program: Program) -> None:
        program.batch["decoder_input_ids"] = seed(torch.zeros(shape, dtype=decoder.dtype), "meta")

    return short, longer_decoder_prompt


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
