"""One data-parallel rank's program while ``shard.py`` rewrites it, and the sizes its library holds each storage at.

``Rank`` copies the traced blocks and reads the graph once (weights, gradients by step, phase and optimizer
clocks); the steps of the transform (``precision.py``, ``states.py``, ``windows.py``, ``buckets.py``,
``offload.py``, ``nvme.py``) change its blocks and add theirs through ``Rank.add``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from math import prod
from typing import Any

import networkx as nx

from vramsim.tracer.graph import storage_nodes

from ..expert_parallel import expert_weight
from ..timeline import Block, Position, Timeline
from .micro_steps import micro_steps
from .plan import ShardingPlan, itemsize, shard_bytes

__all__ = ["COMMUNICATION", "MODEL_STATE", "Rank", "Weight"]

MODEL_STATE = ("parameters", "gradients", "optimizer_states")
"""The categories of the model states a rank holds its share of."""
COMMUNICATION = "communication"
"""The category of the buffers data parallelism adds."""


@dataclass(slots=True)
class Weight:
    """A weight as the graph names it: its storage, its name, its shape and its bytes."""

    sid: int
    name: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def numel(self) -> int:
        return prod(self.shape)


class Rank:
    """One rank's blocks, weights and clocks, rewritten in place by the sharding steps, with the sizes it holds them at."""

    def __init__(
        self, graph: nx.MultiDiGraph, timeline: Timeline, plan: ShardingPlan, held: Collection[str] | None = None
    ) -> None:
        self.graph = graph
        self.plan = plan
        self.n = plan.shard_size
        self.blocks = [block.copy() for block in timeline.blocks]
        self.traced = graph.graph["storage_count"]
        self.attrs: list[dict[str, Any]] = [attrs for _, attrs in storage_nodes(graph)]
        self.weights = {
            a["owner"]: Weight(sid, a["owner"], tuple(a["shape"]), a["nbytes"])
            for sid, a in enumerate(self.attrs)
            if a["category"] == "parameters" and (held is None or a["owner"] in held)
        }
        self.restricted = held is not None
        self.grads: dict[int, list[int]] = defaultdict(list)
        """Gradient sids by step."""
        for sid, a in enumerate(self.attrs):
            if a["category"] == "gradients" and self.blocks[sid].category == "gradients" and a["owner"] in self.weights:
                self.grads[a["step"]].append(sid)
        self.buffers: dict[str, int] = {}
        self.host: dict[str, int] = {}
        self.notes: list[str] = []
        self.gathered = 0
        self.gather_itemsize: dict[str, int] = {}
        """Weights the program casts under autocast, gathered in that dtype instead (``precision.py``)."""
        self.held_itemsize: dict[int, int] = {}
        """Traced weights and gradients DeepSpeed's bf16/fp16 mode holds in the low dtype instead (``precision.py``)."""
        self.optimizer_span: dict[int, tuple[int, int]] = {}
        """Step -> (first, last) clock of its optimizer step."""
        for node, attrs in graph.nodes(data=True):
            if node[0] == "op" and attrs["phase"] == "optimizer":
                first, last = self.optimizer_span.get(attrs["step"], (attrs["clock_after"], attrs["clock_after"]))
                self.optimizer_span[attrs["step"]] = (min(first, attrs["clock_after"]), max(last, attrs["clock_after"]))
        made = {
            step: {self.attrs[sid]["owner"]: (sid, self.blocks[sid].alloc_at[0]) for sid in sids}
            for step, sids in self.grads.items()
        }
        self.micro_steps = micro_steps(graph, made)
        """Step -> its forward-and-backward micro-steps (one without gradient accumulation)."""
        self.whole_gradients: set[int] = set()
        """Traced gradients kept whole through the accumulation micro-steps until the library takes them (FSDP2's
        reduce-scatter, DDP's copy into its bucket views): live gradients, not the ones the rank keeps
        (``Sharded.model_state``)."""
        self._seq = 0

    # -- positions ------------------------------------------------------------------------------

    def at(self, clock: int, tier: int) -> Position:
        self._seq += 1
        return (clock, tier, self._seq)

    def add(
        self,
        nbytes: int,
        category: str,
        op: str,
        *,
        module: str = "",
        phase: str = "setup",
        step: int = -1,
        alloc_at: Position,
        free_at: Position | None,
    ) -> None:
        self.blocks.append(
            Block(
                nbytes=nbytes, category=category, module=module, phase=phase, op=op, step=step, alloc_at=alloc_at, free_at=free_at
            )
        )

    # -- sizes ----------------------------------------------------------------------------------

    def ranks_of(self, name: str | None) -> int:
        """The ranks weight ``name``'s states are divided over: an expert's (``expert_weight``) the ranks holding the
        same experts, any other every shard rank."""
        return self.plan.expert_shard_size if name is not None and expert_weight(name) else self.n

    def shard_of(self, sid: int) -> int:
        """Bytes of traced storage ``sid`` on one rank, padded as the plan's library pads."""
        attrs = self.attrs[sid]
        weight = self.weights.get(attrs["owner"])
        same_size = weight is not None and weight.nbytes == attrs["nbytes"]  # not AdamW's scalar step
        shape = weight.shape if weight is not None and same_size else tuple(attrs["shape"])
        nbytes = attrs["nbytes"] // itemsize(attrs) * self.element_size(sid)
        n = self.ranks_of(attrs["owner"])
        return shard_bytes(nbytes, shape, n, dim=self._fsdp_dim(attrs["owner"], shape, n))

    def padded_bytes(self, sid: int) -> int:
        """Traced storage ``sid`` whole as its library pads it: every rank's share (FSDP2's flat buffers hold it)."""
        return self.shard_of(sid) * self.ranks_of(self.attrs[sid]["owner"])

    def _fsdp_dim(self, name: str | None, shape: tuple[int, ...], n: int) -> int | None:
        """FSDP2 shards dim 0; torchtitan shards an expert-parallel rank's experts on dim 1 when they are fewer than
        the ranks sharing them (``apply_fsdp``: ``dp_mod_ep * ep > num_experts``). None: DeepSpeed's flat partition."""
        if self.plan.fsdp == "no":
            return None
        fewer = self.plan.expert_parallel > 1 and name is not None and expert_weight(name) and len(shape) > 1
        return 1 if fewer and shape[0] < n else 0

    def element_size(self, sid: int) -> int:
        """Bytes per element of traced storage ``sid`` as the rank holds it (``held_itemsize``, else as traced)."""
        return self.held_itemsize.get(sid, itemsize(self.attrs[sid]))

    def gathered_bytes(self, weight: Weight, *, padded: bool = False) -> int:
        """A weight's gathered copy: in the dtype it is gathered in (``gather_itemsize``); ``padded``: every
        rank's padded shard, as FSDP2's flat all-gather output holds it."""
        size = self.element_size(weight.sid)
        elements = self.padded_bytes(weight.sid) // size if padded else weight.numel
        return elements * self.gather_itemsize.get(weight.name, size)

    def trainable_weights(self) -> set[str]:
        """Names of the weights that get gradients."""
        return {self.attrs[sid]["owner"] for sids in self.grads.values() for sid in sids}

    def sharded_weight(self, weight: Weight) -> bool:
        if not self.plan.shards_parameters:
            return False
        return self.plan.fsdp != "no" or weight.numel >= self.plan.zero_settings.param_persistence_threshold

    def holds(self, key: int) -> bool:
        """Whether block ``key`` is this rank's: all are, unless it holds some weights only (a pipeline stage's)
        and the block is another weight's state."""
        owner = self.attrs[key]["owner"] if key < self.traced else None
        return not (self.restricted and owner and owner not in self.weights)
