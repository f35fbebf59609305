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

The schedule (micro-batches in flight, the backwards that can hold the most, the receive buffers
and input gradients torch.distributed.pipelining adds) is ``pipeline_schedule.py``'s.

Under data parallelism a stage is cut from one data-parallel rank of its own weights
(``sharding.py``'s ``shard`` with ``weights=PipelineSplit.weights(rank)``): its buffers, gathers and
shards are blocks after this split's, all the stage's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import networkx as nx

from vramsim.tracer.graph import op_node, saved_edges, storage_node, storage_nodes

from .pipeline_schedule import PipelinePlan, backwards, held_copies, receive_buffers
from .timeline import Block, Timeline, order_blocks

__all__ = ["PipelineSplit", "StageTimeline"]

_STATE = ("parameters", "gradients", "optimizer_states")
_EVERY_STAGE = ("buffers", "inputs")
ACCUMULATE = "pipeline gradient accumulation"
"""The op name of a later micro-batch's gradient before it is added into the held one (category ``temporaries``)."""


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
    data-parallel rank's version of it (``estimators/sharding/shard.py`` restricted to ``weights(rank)``)."""

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
        self.chunk_of_layer = {m: i // per_chunk for i, m in enumerate(self.layers)}
        self.rank_of_layer = {m: chunk % plan.stages for m, chunk in self.chunk_of_layer.items()}
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
        self.received = self._received()

    def _received(self) -> dict[int, set[int]]:
        """Pipeline chunk -> the traced storages it receives from the chunk before: made in forward by that chunk's
        layers, read in forward by its own (a layer's output hidden states; buffers every stage builds are not
        sent)."""
        received: dict[int, set[int]] = defaultdict(set)
        last = self.plan.stages * self.plan.virtual_stages - 1
        for sid, attrs in storage_nodes(self.graph):
            if attrs["phase"] != "forward" or attrs["category"] in _STATE + _EVERY_STAGE:
                continue
            made = [op for op, _, key in self.graph.in_edges(storage_node(sid), keys=True) if key == "produced"]
            layer = self._layer(self.graph.nodes[made[0]]["module"]) if made else None
            chunk = self.chunk_of_layer[layer] if layer is not None else last
            readers = (
                self.graph.nodes[op]["module"]
                for _, op in self.graph.out_edges(storage_node(sid))
                if self.graph.nodes[op]["phase"] == "forward"
            )
            if chunk < last and any(self.chunk_of_layer.get(self._layer(m) or "") == chunk + 1 for m in readers):
                received[chunk + 1].add(sid)
        return received

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
        started = [
            (first, layer) for (step, layer), first in self.backward_starts.items() if step == attrs["step"] and first <= clock
        ]
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

    def stages(self, rank: int, timeline: Timeline | None = None) -> list[StageTimeline]:
        """Stage ``rank``'s timelines, cut from ``timeline`` (this split's, or a data-parallel rank's version of it
        whose blocks beyond this split's are the stage's own: its buffers, gathers and shards), one for each of its
        backwards that can be its worst (``pipeline_schedule.backwards``): the caller replays each and keeps the busiest."""
        source = self.timeline if timeline is None else timeline
        sids = [sid for sid, ranks in enumerate(self._sid_ranks()) if rank in ranks]
        blocks = [source.blocks[sid].copy() for sid in sids]
        traced, own = self.graph.graph["storage_count"], len(self.timeline.blocks)
        blocks += [block.copy() for block in source.blocks[traced:own] if rank in self._ranks_of_module(block.module)]
        blocks += [block.copy() for block in source.blocks[own:]]  # after a checkpointing what-if's recomputes, the rank's
        chunks = range(rank, self.plan.stages * self.plan.virtual_stages, self.plan.stages)
        received = set().union(*(self.received[chunk] for chunk in chunks))
        sent = set().union(*(self.received[chunk + 1] for chunk in chunks))
        last_step = len(self.graph.graph["step_clocks"]) - 1
        ends = {
            step: max(
                (b.alloc_at[0] for b in blocks if b.step == step and b.phase == "backward"),
                default=self.backward_start.get(step, 0),
            )
            for step in range(last_step + 1)
        }
        for sid, block in zip(sids, blocks, strict=False):
            if sid in received:  # it arrives in a receive buffer of the stage's own (``pipeline_schedule.receive_buffers``)
                block.nbytes = 0
            elif sid in sent and block.free_at is not None:  # the schedule keeps it (``fwd_cache``) for its backward
                block.free_at = max(block.free_at, (ends[block.step], 3, 0))
        held = self._held(blocks, last_step)
        inputs, outputs = (
            sum(self._step_bytes(self.received[c], last_step) for c in chunks if c in self.received),
            sum(self._step_bytes(self.received[c + 1], last_step) for c in chunks if c + 1 in self.received),
        )
        blocks += receive_buffers(self.plan, inputs, outputs)
        gradients = [i for i, sid in enumerate(sids) if sid in self.gradient_sids]
        layers = tuple(m for m in self.layers if self.rank_of_layer[m] == rank)
        timelines = []
        for backward in backwards(self.plan, rank, held, inputs):
            each = [block.copy() for block in blocks]
            if backward.accumulates:
                each += self._accumulated([(sids[i], each[i]) for i in gradients])
            each += held_copies(
                self.plan,
                ends,
                step_clocks=self.graph.graph["step_clocks"],
                forward_end=self.forward_end,
                backward_start=self.backward_start,
                extra=round(held * (backward.in_flight - 1)),
                backward=backward,
                received=inputs,
            )
            timelines.append(
                StageTimeline(
                    rank=rank,
                    layers=layers,
                    timeline=order_blocks(each, self.graph.graph["step_clocks"]),
                    held_bytes=held,
                    in_flight=backward.in_flight,
                )
            )
        return timelines

    def _step_bytes(self, sids: set[int], step: int) -> int:
        nodes = self.graph.nodes
        return sum(nodes[storage_node(sid)]["nbytes"] for sid in sids if nodes[storage_node(sid)]["step"] == step)

    def _sid_ranks(self) -> list[set[int]]:
        """The stages of each traced storage, by sid (worked out once for every stage and every variant)."""
        if self.sid_ranks is None:
            self.sid_ranks = [self._ranks(sid, attrs) for sid, attrs in storage_nodes(self.graph)]
        return self.sid_ranks

    def _accumulated(self, gradients: list[tuple[int, Block]]) -> list[Block]:
        """A backward after the first runs with the earlier micro-batches' gradients held: each gradient
        (sid, block) is held from the step's backward start, and the one the traced backward makes is added into it
        in place by AccumulateGrad, which runs once the op's autograd node is done: a temporary through the next op
        (an mm's backward makes the weight's gradient, then the input's). Gradients a what-if drops at once (DDP's
        bucket view: the buckets hold them) are not."""
        added = []
        for sid, block in gradients:
            clock = block.alloc_at[0]
            if block.phase != "backward" or (block.free_at is not None and block.free_at[0] <= clock):
                continue
            added.append(
                Block(
                    nbytes=block.nbytes,
                    category="temporaries",
                    module=block.module,
                    phase="backward",
                    op=ACCUMULATE,
                    step=block.step,
                    alloc_at=block.alloc_at,
                    free_at=(self._next_op_clock(sid, clock), 3, 0),
                )
            )
            block.alloc_at = (self.backward_start.get(block.step, clock), 4, 0)
        return added

    def _next_op_clock(self, sid: int, clock: int) -> int:
        """The clock of the next op after the one that made traced storage ``sid`` that allocates (views and
        detaches between them do not); ``clock`` if none follows."""
        made = [op for op, _, key in self.graph.in_edges(storage_node(sid), keys=True) if key == "produced"]
        index = made[0][1] + 1 if made else None
        while index is not None and op_node(index) in self.graph:
            after = self.graph.nodes[op_node(index)]["clock_after"]
            if after > clock:
                return after
            index += 1
        return clock

    def _held(self, blocks: list[Block], step: int) -> int:
        """Bytes of the step's non-state blocks live across its forward-to-backward boundary."""
        end, start = self.forward_end[step], self.backward_start.get(step, self.forward_end[step] + 1)
        return sum(
            b.nbytes
            for b in blocks
            if b.step == step
            and b.category not in _STATE + _EVERY_STAGE
            and b.alloc_at[0] <= end
            and (b.free_at is None or b.free_at[0] >= start)
        )
