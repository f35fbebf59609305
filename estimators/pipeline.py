"""Pipeline parallelism as a what-if over the traced program: what each stage holds.

The traced step is one micro-batch through the whole model. A pipeline splits the decoder layers
(the graph's ``units``) into ``stages`` equal runs, the embedding on the first stage and
everything after the last layer (final norm, head, loss) on the last; torchtitan and Megatron
split the same way. A stage's timeline keeps the blocks its ops make or read:

- weights, their gradients and optimizer states by the weight's module (``owner``) and every
  stage whose forward reads the weight (a tied embedding: the first stage and the last);
- activations and temporaries of the forward by the module of the op that made them (of the
  backward, by the layer whose backward was running: the last whose saved tensors were being
  read, the last stage before any), plus every stage whose
  forward ops read them, so a layer output that crosses a stage boundary is counted on both sides:
  the sender keeps it for its backward, the receiver holds its own received copy;
- buffers (rotary tables) and the batch on every stage, as every stage builds its own.

In flight: a stage holds the activations of several micro-batches between their forward and
their backward. The traced micro-batch's own are on the timeline; the others are added as copies
of what the stage holds across its forward-to-backward boundary, live through the traced backward
(the oldest micro-batch's backward runs while the others wait and the gradients accumulate). How
many, per rank ``r`` of ``P`` with ``M`` micro-batches, follows torch.distributed.pipelining's
``schedules.py``: GPipe all ``M``; 1F1B ``min(M, P - r)`` (its ``warmup_chunks`` + 0, since a
backward frees one before the next forward); interleaved 1F1B with ``V`` chunks per rank
``_get_warmup_ops`` + 1 chunk-micro-batches, each a ``1/V`` share of the rank's activations.
Where a rank runs more micro-batches than it holds (1F1B, interleaved), a backward after the first
starts with the gradients accumulated so far: each traced gradient is held from the backward's
start, and the one the traced backward makes is a moment's temporary added into it.

Under data parallelism a stage is cut from one data-parallel rank of its own weights
(``sharding.py``'s ``shard`` with ``weights=PipelineSplit.weights(rank)``): its buffers, gathers and
shards are blocks after this split's, all the stage's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import networkx as nx

from vramsim.tracer.graph import saved_edges, storage_nodes

from .timeline import Block, Timeline, order_blocks

__all__ = ["PP_SCHEDULES", "PipelinePlan", "PipelineSplit", "StageTimeline", "in_flight", "pipeline_plan"]

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
_STATE = ("parameters", "gradients", "optimizer_states")
_EVERY_STAGE = ("buffers", "inputs")
IN_FLIGHT = "pipeline in flight"
"""The op name of the added copies (category ``activations``)."""
ACCUMULATE = "pipeline gradient accumulation"
"""The op name of a later micro-batch's gradient before it is added into the held one (category ``temporaries``)."""


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    stages: int = 1
    schedule: str = "1f1b"
    micro_batches: int = 1
    virtual_stages: int = 1
    """Chunks per rank: more than 1 only for interleaved 1F1B."""

    @property
    def active(self) -> bool:
        return self.stages > 1


def pipeline_plan(stages: int, schedule: str, micro_batches: int | None, virtual_stages: int) -> PipelinePlan:
    """The plan for these options; ``ValueError`` naming the choices otherwise."""
    for name, value in (("pp", stages), ("pp_virtual_stages", virtual_stages)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    text = str(schedule).strip().lower()
    if text not in PP_SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; choose one of: {', '.join(PP_SCHEDULES)}")
    m = stages if micro_batches is None else micro_batches
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"micro_batches must be a positive integer, got {micro_batches!r}")
    if text == "interleaved-1f1b" and m % max(1, m // stages):
        raise ValueError(f"interleaved 1F1B needs micro-batches a multiple of the rounds ({max(1, m // stages)}), got {m} "
                         "(torch.distributed.pipelining ScheduleInterleaved1F1B)")  # fmt: skip
    return PipelinePlan(stages=stages, schedule=text, micro_batches=m,
                        virtual_stages=virtual_stages if text == "interleaved-1f1b" else 1)  # fmt: skip


def in_flight(plan: PipelinePlan, rank: int) -> float:
    """Micro-batches' worth of the rank's activations held at once (a fraction with interleaving)."""
    p, m, v = plan.stages, plan.micro_batches, plan.virtual_stages
    if plan.schedule == "gpipe":
        return m
    if plan.schedule == "1f1b":
        return min(m, p - rank)
    per_round = m // max(1, m // p)
    warmup = min((v - 1) * per_round + 2 * (p - 1 - rank), m * v)  # schedules.py _get_warmup_ops
    chunks = warmup + 1 if warmup < m * v else warmup  # the 1F1B phase runs a forward before each backward
    return chunks / v


@dataclass(frozen=True, slots=True)
class StageTimeline:
    rank: int
    layers: tuple[str, ...]
    timeline: Timeline
    held_bytes: int
    """Activation bytes the rank holds per micro-batch across its forward-to-backward boundary."""
    in_flight: float


class PipelineSplit:
    """Which stage holds each block of one timeline; ``stage`` cuts a rank's timeline from it, or from a
    data-parallel rank's version of it (``estimators/sharding.py`` restricted to ``weights(rank)``)."""

    def __init__(self, graph: nx.MultiDiGraph, timeline: Timeline, plan: PipelinePlan) -> None:
        self.graph = graph
        self.timeline = timeline
        self.plan = plan
        self.layers = [unit.module for unit in graph.graph["units"] if unit.step == 0]
        chunks = plan.stages * plan.virtual_stages
        if not self.layers:
            raise NotImplementedError("a pipeline splits the model's blocks (decoder layers); the trace found none")
        if len(self.layers) % chunks:
            raise ValueError(f"{len(self.layers)} layers do not split evenly into {chunks} pipeline chunks")
        per_chunk = len(self.layers) // chunks
        self.rank_of_layer = {m: (i // per_chunk) % plan.stages for i, m in enumerate(self.layers)}
        self.owners: dict[int, str | None] = {}
        self.sid_ranks: list[set[int]] | None = None
        self.gradient_sids = {sid for sid, attrs in storage_nodes(graph) if attrs["category"] == "gradients"}
        self.weight_ranks: dict[str, set[int]] = {}
        self.weight_sids: dict[str, list[int]] = defaultdict(list)
        for sid, attrs in storage_nodes(graph):
            if attrs["category"] == "parameters":
                self.weight_sids[attrs["owner"]].append(sid)
        units = graph.graph["units"]
        self.backward_starts: dict[tuple[int, str], int] = {}
        """(step, layer) -> first clock its saved tensors were read back."""
        for _, _, hold in saved_edges(graph):
            if hold["unit"] is not None and hold["unpack_clock"] is not None:
                key = (units[hold["unit"]].step, units[hold["unit"]].module)
                self.backward_starts[key] = min(self.backward_starts.get(key, hold["unpack_clock"]), hold["unpack_clock"])
        first_layer = min(u.first_clock for u in graph.graph["units"] if u.step == 0)
        self.before_layers: set[str] = set()
        """Modules outside the layers whose forward runs before the first layer (the embedding): the first stage's."""
        self.forward_end: dict[int, int] = defaultdict(int)
        self.backward_start: dict[int, int] = {}
        for node, attrs in graph.nodes(data=True):
            if node[0] != "op":
                continue
            step, clock = attrs["step"], attrs["clock_after"]
            if attrs["phase"] == "forward":
                self.forward_end[step] = max(self.forward_end[step], clock)
                if step == 0 and clock <= first_layer and self._layer(attrs["module"]) is None:
                    self.before_layers.add(attrs["module"])
            elif attrs["phase"] == "backward":
                self.backward_start[step] = min(self.backward_start.get(step, clock), clock)

    def _layer(self, module: str) -> str | None:
        return next((m for m in self.layers if module == m or module.startswith(m + ".")), None)

    def _ranks_of_module(self, module: str) -> set[int]:
        layer = self._layer(module)
        if layer is not None:
            return {self.rank_of_layer[layer]}
        if module and module in self.before_layers:
            return {0}
        return {self.plan.stages - 1}

    def _ranks(self, sid: int, attrs: dict[str, object]) -> set[int]:
        category = attrs["category"]
        if category in _EVERY_STAGE:
            return set(range(self.plan.stages))
        if category in _STATE or attrs["owner"]:
            return self._weight_ranks(str(attrs["owner"]))
        if attrs["phase"] == "optimizer":
            owner = self._owner(sid)
            return self._ranks_of_module(owner.rpartition(".")[0]) if owner else set(range(self.plan.stages))
        if attrs["phase"] == "backward":
            layer = self._backward_layer(attrs)
            ranks = {self.rank_of_layer[layer] if layer else self.plan.stages - 1}
        else:
            ranks = self._ranks_of_module(str(attrs["module"]))
        return ranks | self._forward_readers(sid)

    def _weight_ranks(self, name: str) -> set[int]:
        """The stages holding a weight (and its gradient and optimizer states): its module's, and every
        stage whose forward reads it, so a tied embedding is the first stage's and the last's, as torchtitan
        and Megatron keep a copy on each."""
        if name not in self.weight_ranks:
            ranks = self._ranks_of_module(name.rpartition(".")[0])
            for sid in self.weight_sids.get(name, ()):
                ranks |= self._forward_readers(sid)
            self.weight_ranks[name] = ranks
        return self.weight_ranks[name]

    def _forward_readers(self, sid: int) -> set[int]:
        ranks: set[int] = set()
        for _, op in self.graph.out_edges(("storage", sid)):  # backward ops' modules are autograd's, not the layer's
            if self.graph.nodes[op]["phase"] == "forward":
                ranks |= self._ranks_of_module(self.graph.nodes[op]["module"])
        return ranks

    def _backward_layer(self, attrs: dict[str, object]) -> str | None:
        """The layer whose backward ran when a backward block was made: the last one whose saved tensors
        began to be read back by then (the trace's module of a backward op is not always the layer's);
        ``None`` before any (the head's and the loss's backward)."""
        clock = attrs["alloc_at"][0]  # type: ignore[index]
        started = [(first, layer) for (step, layer), first in self.backward_starts.items()
                   if step == attrs["step"] and first <= clock]  # fmt: skip
        return max(started)[1] if started else None

    def _owner(self, sid: int) -> str | None:
        """The weight an optimizer temporary belongs to: its own ``owner``, else the owner of the input in its
        position (a foreach op's i-th output is computed from each input list's i-th tensor)."""
        if sid in self.owners:
            return self.owners[sid]
        self.owners[sid] = None  # no cycles
        node = ("storage", sid)
        owner = self.graph.nodes[node]["owner"] or None
        producers = [op for op, _, key in self.graph.in_edges(node, keys=True) if key == "produced"]
        if owner is None and producers:
            op = producers[0]
            outputs = [s for _, (_, s), key in self.graph.out_edges(op, keys=True) if key == "produced"]
            inputs = [self._owner(s) for (_, s), _, key in self.graph.in_edges(op, keys=True) if key == "read"]
            owned = [name for name in inputs if name]
            if owned and len(owned) % len(outputs) == 0:
                owner = owned[outputs.index(sid)]
        self.owners[sid] = owner
        return owner

    def weights(self, rank: int) -> frozenset[str]:
        """The weights stage ``rank`` holds (with their gradients and optimizer states)."""
        return frozenset(name for name in self.weight_sids if rank in self._weight_ranks(name))

    def stage(self, rank: int, timeline: Timeline | None = None) -> StageTimeline:
        """Stage ``rank``'s timeline, cut from ``timeline``: this split's, or a data-parallel rank's version of it
        whose blocks beyond this split's are the stage's own (its buffers, gathers and shards)."""
        source = self.timeline if timeline is None else timeline
        sids = [sid for sid, ranks in enumerate(self._sid_ranks()) if rank in ranks]
        blocks = [source.blocks[sid].copy() for sid in sids]
        gradients = [block for sid, block in zip(sids, blocks, strict=True) if sid in self.gradient_sids]
        traced, own = self.graph.graph["storage_count"], len(self.timeline.blocks)
        blocks += [block.copy() for block in source.blocks[traced:own] if rank in self._ranks_of_module(block.module)]
        blocks += [block.copy() for block in source.blocks[own:]]  # after a checkpointing what-if's recomputes, the rank's
        last_step = len(self.graph.graph["step_clocks"]) - 1
        held = self._held(blocks, last_step)
        count = in_flight(self.plan, rank)
        if count < self.plan.micro_batches:
            blocks += self._accumulated(gradients)
        extra = round(held * (count - 1))
        if extra > 0:
            for step in range(last_step + 1):
                end = max((b.alloc_at[0] for b in blocks if b.step == step and b.phase == "backward"),
                          default=self.backward_start.get(step, 0))  # fmt: skip
                blocks.append(Block(nbytes=extra, category="activations", module="", phase="forward", op=IN_FLIGHT,
                                    step=step, alloc_at=(self.forward_end[step], 4, 0), free_at=(end, 3, 0)))  # fmt: skip
        layers = tuple(m for m in self.layers if self.rank_of_layer[m] == rank)
        ordered = order_blocks(blocks, self.graph.graph["step_clocks"])
        return StageTimeline(rank=rank, layers=layers, timeline=ordered, held_bytes=held, in_flight=count)

    def _sid_ranks(self) -> list[set[int]]:
        """The stages of each traced storage, by sid (worked out once for every stage and every variant)."""
        if self.sid_ranks is None:
            self.sid_ranks = [self._ranks(sid, attrs) for sid, attrs in storage_nodes(self.graph)]
        return self.sid_ranks

    def _accumulated(self, gradients: list[Block]) -> list[Block]:
        """A backward after the first runs with the earlier micro-batches' gradients held: each gradient is
        held from the step's backward start, and the one the traced backward makes is added into it in place
        (AccumulateGrad), a moment's temporary. Gradients a what-if drops at once (DDP's bucket view: the
        buckets hold them) are not."""
        added = []
        for block in gradients:
            clock = block.alloc_at[0]
            if block.phase != "backward" or (block.free_at is not None and block.free_at[0] <= clock):
                continue
            added.append(Block(nbytes=block.nbytes, category="temporaries", module=block.module, phase="backward",
                               op=ACCUMULATE, step=block.step, alloc_at=block.alloc_at, free_at=(clock, 5, 0)))  # fmt: skip
            block.alloc_at = (self.backward_start.get(block.step, clock), 4, 0)
        return added

    def _held(self, blocks: list[Block], step: int) -> int:
        """Bytes of the step's non-state blocks live across its forward-to-backward boundary."""
        end, start = self.forward_end[step], self.backward_start.get(step, self.forward_end[step] + 1)
        return sum(
            b.nbytes for b in blocks
            if b.step == step and b.category not in _STATE + _EVERY_STAGE and b.alloc_at[0] <= end
            and (b.free_at is None or b.free_at[0] >= start)
        )  # fmt: skip
