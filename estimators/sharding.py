"""Data parallelism as a what-if over the traced program: what one rank holds.

The choices (``ShardingPlan``; every rank of pure data parallelism holds the same, so one rank
stands for all):

- DDP (``gpus > 1``, no ZeRO, no FSDP): each replica holds the whole program plus DDP's gradient
  buckets: flat buffers (the first 1 MiB, the others 25 MiB) made when DDP wraps the model and
  kept for the run; with ``gradient_as_bucket_view=False`` (DDP's default) ``.grad`` stays
  separate, with True each ``.grad`` is a view into its bucket and the buckets are the gradients.
- ZeRO-1/2/3 (DeepSpeed): optimizer states (1), + gradients (2), + weights (3) partitioned over the
  ranks; the fp32 master copy of the rank's partition its optimizer updates (stages 1-2 always,
  stage 3 when the weights are not fp32); the reduce bucket (``reduce_bucket_size``); ZeRO-3 gathers a block's weights around its
  forward and its backward, prefetches up to ``stage3_prefetch_bucket_size`` elements of the next
  block, keeps weights under ``stage3_param_persistence_threshold`` whole, and reduces gradients
  into a flat buffer of its partitions made at start-up.
- FSDP2 (``fully_shard`` on each block, then on the root), as torch 2.13's
  ``_fsdp_param_group.py`` runs it: weights, gradients and optimizer states sharded on dim 0; a
  block's weights are all-gathered into a flat output and copied out; in forward the output is
  kept until the next block's copy-out is done, in backward it is dropped after the copy-out and
  the next block's all-gather is prefetched; ``full`` (``reshard_after_forward=True``) frees the
  weights after the forward, ``grad-op`` (False) keeps them to the backward; the root's weights
  (embeddings, final norm, head) stay gathered from forward to the end of backward (FSDP2 does
  not reshard the root after forward); after a block's backward it reshards, copies its gradients
  into a reduce-scatter input (freed when the next block's reduce begins) and keeps its shard.
  Checked against torch's FSDP2 run for real under a fake process group
  (``tests/ground_truth/test_data_parallel_ground_truth.py``).

It transforms a ``Timeline`` (the traced one, or the one a checkpointing what-if made: apply
checkpointing first, then sharding) and reads the graph it came from for what each traced block
is: traced storages keep their sid as key, so the graph gives a weight's name and shape, a
gradient's owner and the blocks' clocks. Its own events sit after a clock's traced and
checkpointing events: tier 2 (buffers filled before frees), 3 (frees), 4 (allocations), 5 (frees
of what was just made).

Known limitations: ZeRO-3 gathers at block granularity (DeepSpeed fetches per submodule, so
fewer weights may be live inside a block) and keeps non-block weights gathered from forward to
the end of backward as FSDP2's root does; ZeRO-1/2's flat buffers are padded per group to
2 x N elements, here each tensor is padded alone (a difference under 2 x N elements per tensor);
the full-size gradient a ZeRO hook copies into the bucket is counted as a moment, not a span.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from math import ceil, prod
from typing import Any

import networkx as nx

from vramsim.tracer.graph import saved_edges, storage_nodes
from vramsim.tracer.records import UnitRecord

from .assumptions import (
    DEEPSPEED_MAX_LIVE_PARAMETERS,
    DEEPSPEED_OVERLAP_COMM_STAGES,
    DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD,
    DEEPSPEED_PREFETCH_BUCKET_ELEMENTS,
    DEEPSPEED_REDUCE_BUCKET_ELEMENTS,
)
from .sharding_plan import (
    FSDP_CHOICES,
    MAX_GPUS,
    ZERO_STAGES,
    ShardingPlan,
    ddp_bucket_sizes,
    itemsize,
    shard_bytes,
    sharding_plan,
)
from .timeline import Block, Position, Timeline, order_blocks

__all__ = ["FSDP_CHOICES", "MAX_GPUS", "ZERO_STAGES", "Sharded", "ShardingPlan", "shard", "sharding_plan"]

_MODEL_STATE = ("parameters", "gradients", "optimizer_states")
_COMM = "communication"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sharded:
    """One rank's program under a ``ShardingPlan``."""

    plan: ShardingPlan
    timeline: Timeline
    model_state: dict[str, int]
    """Bytes of weights, gradients (of one step) and optimizer states the rank holds, as allocated."""
    gathered_elements: int
    """Most weight elements gathered at once (ZeRO-3/FSDP: the current block, the prefetched part, the root)."""
    buffers: dict[str, int] = field(default_factory=dict)
    """Communication buffers by name: bytes of one buffer of that kind."""
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Weight:
    sid: int
    name: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def numel(self) -> int:
        return prod(self.shape)


def shard(graph: nx.MultiDiGraph, timeline: Timeline, plan: ShardingPlan) -> Sharded:
    """``timeline`` (of the program traced as ``graph``) as one rank of ``plan`` runs it."""
    return _Rank(graph, timeline, plan).apply()


class _Rank:
    def __init__(self, graph: nx.MultiDiGraph, timeline: Timeline, plan: ShardingPlan) -> None:
        self.graph = graph
        self.plan = plan
        self.n = plan.gpus
        self.blocks = [replace(block) for block in timeline.blocks]
        self.traced = graph.graph["storage_count"]
        self.attrs: list[dict[str, Any]] = [attrs for _, attrs in storage_nodes(graph)]
        self.weights = {a["owner"]: _Weight(sid, a["owner"], tuple(a["shape"]), a["nbytes"])
                        for sid, a in enumerate(self.attrs) if a["category"] == "parameters"}  # fmt: skip
        self.grads: dict[int, list[int]] = defaultdict(list)
        """Gradient sids by step."""
        for sid, a in enumerate(self.attrs):
            if a["category"] == "gradients" and self.blocks[sid].category == "gradients":
                self.grads[a["step"]].append(sid)
        self.model_state: dict[str, int] = dict.fromkeys(_MODEL_STATE, 0)
        self.buffers: dict[str, int] = {}
        self.notes: list[str] = []
        self.gathered = 0
        self.phase_bounds: dict[int, tuple[int, int]] = {}
        """Step -> (last clock of its forward, first clock of its backward)."""
        forward_end: dict[int, int] = defaultdict(int)
        backward_start: dict[int, int] = {}
        for node, attrs in graph.nodes(data=True):
            if node[0] == "op" and attrs["phase"] == "forward":
                forward_end[attrs["step"]] = max(forward_end[attrs["step"]], attrs["clock_after"])
            elif node[0] == "op" and attrs["phase"] == "backward":
                step = attrs["step"]
                backward_start[step] = min(backward_start.get(step, attrs["clock_after"]), attrs["clock_after"])
        for step, end in forward_end.items():
            self.phase_bounds[step] = (end, backward_start.get(step, end + 1))
        self._seq = 0

    # -- positions ------------------------------------------------------------------------------

    def at(self, clock: int, tier: int) -> Position:
        self._seq += 1
        return (clock, tier, self._seq)

    def add(self, nbytes: int, category: str, op: str, *, module: str = "", phase: str = "setup", step: int = -1,
            alloc_at: Position, free_at: Position | None) -> None:  # fmt: skip
        self.blocks.append(Block(nbytes=nbytes, category=category, module=module, phase=phase, op=op, step=step,
                                 alloc_at=alloc_at, free_at=free_at))  # fmt: skip

    # -- sizes ----------------------------------------------------------------------------------

    def shard_of(self, sid: int) -> int:
        """Bytes of traced storage ``sid`` on one rank, padded as the plan's library pads."""
        attrs = self.attrs[sid]
        weight = self.weights.get(attrs["owner"])
        same_size = weight is not None and weight.nbytes == attrs["nbytes"]  # not AdamW's scalar step
        shape = weight.shape if weight is not None and same_size else tuple(attrs["shape"])
        return shard_bytes(attrs["nbytes"], shape, self.n, dim0=self.plan.fsdp != "no")

    def sharded_weight(self, weight: _Weight) -> bool:
        if not self.plan.shards_parameters:
            return False
        return self.plan.fsdp != "no" or weight.numel >= DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD

    # -- the transform --------------------------------------------------------------------------

    def apply(self) -> Sharded:
        last_step = len(self.graph.graph["step_clocks"]) - 1
        self._shard_states()
        if self.plan.zero or self.plan.fsdp != "no":
            self._training_windows()
            self._master_partition()
        elif self.plan.gpus > 1 and any(self.grads.values()):
            self._ddp_buckets()
        for block in self.blocks:  # weights as held (not gathered), optimizer states, one step's gradients
            if (block.category == "parameters" and block.op != "all_gather") or block.category == "optimizer_states" or (
                block.category == "gradients" and block.step in (-1, last_step)
            ):
                self.model_state[block.category] += block.nbytes
        timeline = order_blocks(self.blocks, self.graph.graph["step_clocks"])
        return Sharded(plan=self.plan, timeline=timeline, model_state=self.model_state,
                       gathered_elements=self.gathered, buffers=self.buffers, notes=self.notes)  # fmt: skip

    def _shard_states(self) -> None:
        """Weights, optimizer states and the optimizer step's temporaries shrink to the rank's share."""
        for sid in range(self.traced):
            block = self.blocks[sid]
            if block.category == "optimizer_states" and self.plan.shards_optimizer:
                block.nbytes = self.shard_of(sid)
            elif block.category == "temporaries" and block.phase == "optimizer" and self.plan.shards_optimizer:
                block.nbytes = ceil(block.nbytes / self.n)  # the step runs on the rank's shard only
            elif block.category == "parameters" and self.sharded_weight(self.weights[self.attrs[sid]["owner"]]):
                block.nbytes = self.shard_of(sid)

    def _master_partition(self) -> None:
        """DeepSpeed's optimizer updates an fp32 copy of the rank's partition of the trainable weights:
        stages 1-2 always clone it (stage_1_and_2.py ``single_partition_of_fp32_groups``), stage 3 only
        when the weights are not fp32 already (stage3.py ``fp32_partitioned_groups_flat``)."""
        trainable = {self.attrs[sid]["owner"] for sids in self.grads.values() for sid in sids}
        weights = [w for w in self.weights.values() if w.name in trainable]
        if not self.plan.zero or not weights:
            return
        fp32 = all(itemsize(self.attrs[w.sid]) == 4 for w in weights)
        if self.plan.zero == 3 and fp32:
            return
        nbytes = sum(4 * ceil(w.numel / self.n) for w in weights)
        self.add(nbytes, "parameters", "zero.fp32_master_partition", alloc_at=self.at(0, 4), free_at=None)
        if not fp32:
            self.notes.append("DeepSpeed keeps optimizer states with its fp32 master partition; the traced optimizer "
                              "keeps them in the weights' dtype (DeepSpeed's bf16/fp16 modes are not modelled)")

    def _ddp_buckets(self) -> None:
        """DDP's Reducer: buckets over the trainable weights in reverse order, kept for the run."""
        trainable = {self.attrs[sid]["owner"] for sids in self.grads.values() for sid in sids}
        weights = sorted(self.weights.values(), key=lambda w: w.sid, reverse=True)
        sizes = [w.nbytes for w in weights if w.name in trainable]
        category = "gradients" if self.plan.bucket_view else _COMM
        for index, nbytes in enumerate(ddp_bucket_sizes(sizes)):
            self.add(nbytes, category, "ddp.bucket", alloc_at=self.at(0, 4), free_at=None)
            self.buffers[f"DDP bucket {index}"] = nbytes
        if self.plan.bucket_view:  # the Reducer copies autograd's new gradient into its bucket and drops it
            for sids in self.grads.values():
                for sid in sids:
                    block = self.blocks[sid]
                    block.free_at = self.at(block.alloc_at[0], 5)
                    block.category = "temporaries"

    def _training_windows(self) -> None:
        units = self.graph.graph["units"]
        unpacks: dict[int, list[int]] = defaultdict(list)
        for _, _, hold in saved_edges(self.graph):
            if hold["unit"] is not None and hold["unpack_clock"] is not None:
                unpacks[hold["unit"]].append(hold["unpack_clock"])
        groups = _groups([unit.module for unit in units], self.weights.values())
        for step, (first_clock, _) in enumerate(self.graph.graph["step_clocks"]):
            calls = [(i, unit) for i, unit in enumerate(units) if unit.step == step]
            grads = self.grads.get(step, [])
            if not grads:
                continue
            window = _StepWindows(self, step, first_clock, calls, unpacks, groups)
            if self.plan.shards_parameters:  # first: a block reshards before its reduce-scatter input is made
                window.gathers()
            window.gradients()
            self._reduce_buckets(step, grads)

    def _reduce_buckets(self, step: int, grads: list[int]) -> None:
        """DeepSpeed's reduce (ipg) bucket: stage 1/2 for backward, stage 3 for the run."""
        if not self.plan.zero:
            return
        element = max(itemsize(self.attrs[sid]) for sid in grads)
        nbytes = DEEPSPEED_REDUCE_BUCKET_ELEMENTS * element
        if self.plan.zero == 3:  # one bucket per gradient dtype, made at start-up
            if step == 0:
                self.add(nbytes, _COMM, "zero.reduce_bucket", alloc_at=self.at(0, 4), free_at=None)
                self.buffers["ZeRO reduce bucket"] = nbytes
            return
        first = min(self.blocks[sid].alloc_at[0] for sid in grads)
        last = max(self.blocks[sid].alloc_at[0] for sid in grads)
        for _ in range(2 if self.plan.zero in DEEPSPEED_OVERLAP_COMM_STAGES else 1):  # overlap_comm: double buffer
            self.add(nbytes, _COMM, "zero.reduce_bucket", phase="backward", step=step,
                     alloc_at=self.at(first, 2), free_at=self.at(last, 3))  # fmt: skip
        self.buffers["ZeRO reduce bucket"] = nbytes


class _StepWindows:
    """One step's gather and reduce moments per block (decoder layer) and for the root."""

    def __init__(self, rank: _Rank, step: int, first_clock: int, calls: list[tuple[int, UnitRecord]],
                 unpacks: dict[int, list[int]], groups: dict[str, list[_Weight]]) -> None:  # fmt: skip
        self.rank = rank
        self.step = step
        self.first_clock = first_clock
        self.calls = sorted(calls, key=lambda item: item[1].first_clock)
        self.groups = groups
        grad_clock = {rank.attrs[sid]["owner"]: rank.blocks[sid].alloc_at[0] for sid in rank.grads[step]}
        self.grad_sids = {rank.attrs[sid]["owner"]: sid for sid in rank.grads[step]}
        self.end_of_backward = max(grad_clock.values())
        self.forward_end, self.backward_start = rank.phase_bounds[step]
        self.backward: dict[str, tuple[int, int]] = {}
        """Block module -> (first, last) clock of its backward: first saved-tensor read, last gradient."""
        for index, unit in self.calls:
            clocks = [grad_clock[w.name] for w in groups.get(unit.module, []) if w.name in grad_clock]
            reads = unpacks.get(index, [])
            if clocks or reads:
                start = min(reads) if reads else min(clocks)
                self.backward[unit.module] = (start, max(clocks) if clocks else max(reads))
        root = [grad_clock[w.name] for w in groups.get("", []) if w.name in grad_clock]
        self.backward[""] = (first_clock, max(root) if root else self.end_of_backward)

    def gradients(self) -> None:
        """Each gradient is whole until its block's reduce, then the rank keeps its shard."""
        rank, plan = self.rank, self.rank.plan
        if not plan.shards_gradients:
            return
        if plan.zero == 3:
            self._zero3_gradients()
            return
        order = [module for module, _ in sorted(self.backward.items(), key=lambda item: item[1][1])]
        for position, module in enumerate(order):
            end = self.backward[module][1]
            sids = [self.grad_sids[w.name] for w in self.groups.get(module, []) if w.name in self.grad_sids]
            if not sids:
                continue
            if plan.fsdp != "no":  # the reduce-scatter input, freed when the next block's reduce begins
                last = position + 1 == len(order)  # the root's final callback frees the last one
                until = self.end_of_backward if last else self.backward[order[position + 1]][1]
                total = sum(rank.shard_of(sid) * rank.n for sid in sids)
                rank.add(total, _COMM, "fsdp.reduce_scatter_input", module=module, phase="backward", step=self.step,
                         alloc_at=rank.at(end, 2), free_at=rank.at(until, 3 if last or until == end else 2))  # fmt: skip
                rank.buffers["FSDP reduce-scatter input (largest block)"] = max(
                    total, rank.buffers.get("FSDP reduce-scatter input (largest block)", 0))
            for sid in sids:
                self._reshard_gradient(sid, end if plan.fsdp != "no" else None)

    def _reshard_gradient(self, sid: int, reduced: int | None) -> None:
        """The whole gradient lives to ``reduced`` (FSDP) or only its own moment (ZeRO-2's bucket copy)."""
        rank = self.rank
        block = rank.blocks[sid]
        whole_free = rank.at(reduced, 3) if reduced is not None and reduced > block.alloc_at[0] else rank.at(
            block.alloc_at[0], 5)  # fmt: skip
        sharded_at = rank.at(whole_free[0], 4)
        rank.add(rank.shard_of(sid), "gradients", "reduce_scatter", module=block.module, phase="backward",
                 step=block.step, alloc_at=sharded_at, free_at=block.free_at)  # fmt: skip
        if block.free_at is not None and block.free_at < sharded_at:
            rank.blocks[-1].free_at = rank.at(sharded_at[0], 5)
        block.free_at = whole_free
        block.category = "temporaries"  # the whole gradient is a moment's copy now

    def _zero3_gradients(self) -> None:
        """ZeRO-3 reduces each gradient into a flat buffer of the rank's partitions, made at start-up."""
        rank = self.rank
        sids = list(self.grad_sids.values())
        for sid in sids:
            block = rank.blocks[sid]
            block.free_at = rank.at(block.alloc_at[0], 5)
            block.category = "temporaries"
        if self.step == 0:
            total = sum(rank.shard_of(sid) for sid in sids)
            rank.add(total, "gradients", "zero3.grad_partitions", alloc_at=rank.at(0, 4), free_at=None)

    def gathers(self) -> None:
        """Each block's weights gathered around its forward and its backward."""
        if self.rank.plan.fsdp != "no":
            self._fsdp_gathers()
        else:
            self._zero3_gathers()

    def _fsdp_gathers(self) -> None:
        """FSDP2 as torch 2.13's ``_fsdp_param_group.py`` runs it: in forward a group's flat all-gather
        output is kept until the next group's copy-out is done (``all_gather_state``) and the root's
        post-forward frees the last; in backward a group's pre-backward copies its own out, frees that output and
        prefetches the next group's (``_backward_prefetch``; the root's pre-backward prefetches the first)."""
        rank = self.rank
        reshard = rank.plan.fsdp == "full"
        forward = [("", self.first_clock, self.backward[""][1])] + [
            (u.module, u.first_clock, u.last_clock if reshard else self.backward.get(u.module, (0, u.last_clock))[1])
            for _, u in self.calls
        ]  # fmt: skip
        kept: Block | None = None
        for module, start, end in forward:
            weights = self.groups.get(module, [])
            if not weights:
                continue
            output = self._all_gather_output(weights, module, rank.at(start, 2), "forward")
            self._unsharded(weights, module, start, end, "forward")
            if kept is not None:  # ``wait_for_unshard``'s local ``prev_all_gather_state`` holds it past the copy-out
                kept.free_at = rank.at(start, 5)
            kept = output
        if kept is not None:
            kept.free_at = rank.at(self.forward_end, 3)
        largest = max((sum(w.numel for w in self.groups.get(m, [])) for m, _, _ in forward[1:]), default=0)
        rank.gathered = max(rank.gathered, largest + sum(w.numel for w in self.groups.get("", [])))
        if not reshard:
            return
        backward = sorted(((m, s - 1, e) for m, (s, e) in self.backward.items() if m), key=lambda item: item[1])
        prefetch_at = self.backward_start - 1
        for module, start, end in backward:
            weights = self.groups.get(module, [])
            if not weights:
                continue
            output = self._all_gather_output(weights, module, rank.at(prefetch_at, 4), "backward")
            self._unsharded(weights, module, start, end, "backward")
            output.free_at = rank.at(start, 4)  # copied out, then dropped, before the next prefetch
            prefetch_at = start

    def _all_gather_output(self, weights: list[_Weight], module: str, at: Position, phase: str) -> Block:
        """FSDP2's flat all-gather output of a group (every rank's padded shard; the input is a view into it)."""
        rank = self.rank
        total = sum(rank.shard_of(w.sid) * rank.n for w in weights)
        rank.add(total, _COMM, "fsdp.all_gather_output", module=module, phase=phase, step=self.step, alloc_at=at,
                 free_at=None)  # fmt: skip
        key = "FSDP all-gather output (largest block)"
        rank.buffers[key] = max(total, rank.buffers.get(key, 0))
        return rank.blocks[-1]

    def _unsharded(self, weights: list[_Weight], module: str, start: int, end: int, phase: str) -> None:
        """Each weight's unsharded copy from the copy-out to the reshard (a reshard at the next group's
        start comes before that group's all-gather)."""
        rank = self.rank
        for weight in weights:
            free = rank.at(end, 2) if end > start else rank.at(end, 5)
            rank.add(weight.nbytes, "parameters", "all_gather", module=module, phase=phase, step=self.step,
                     alloc_at=rank.at(start, 4), free_at=free)  # fmt: skip

    def _zero3_gathers(self) -> None:
        """ZeRO-3: a block's weights around its forward and its backward, with part of the next prefetched."""
        rank = self.rank
        forward = [(u.module, u.first_clock, u.last_clock) for _, u in self.calls]
        self._gather_chain(forward, "forward")
        # gathered before the clock of the first saved-tensor read, so before a checkpoint's recompute there
        backward = sorted(((m, s - 1, e) for m, (s, e) in self.backward.items() if m), key=lambda item: item[1])
        self._gather_chain(backward, "backward")
        root = [w for w in self.groups.get("", []) if rank.sharded_weight(w)]
        self._gather(root, "", self.first_clock, self.first_clock, self.backward[""][1], "forward")
        largest = max((sum(w.numel for w in self.groups.get(m, []) if rank.sharded_weight(w)) for m, _, _ in forward),
                      default=0)  # fmt: skip
        live = largest + min(largest, DEEPSPEED_PREFETCH_BUCKET_ELEMENTS) + sum(w.numel for w in root)
        rank.gathered = max(rank.gathered, live)
        if live > DEEPSPEED_MAX_LIVE_PARAMETERS:
            note = (f"{live:,} weight elements gathered at once exceed stage3_max_live_parameters "
                    f"({DEEPSPEED_MAX_LIVE_PARAMETERS:,}): DeepSpeed would release some sooner")  # fmt: skip
            if note not in rank.notes:
                rank.notes.append(note)

    def _gather_chain(self, windows: list[tuple[str, int, int]], phase: str) -> None:
        """Windows in run order; each block's gather starts in the previous block's window (prefetch)."""
        for position, (module, start, end) in enumerate(windows):
            weights = [w for w in self.groups.get(module, []) if self.rank.sharded_weight(w)]
            early = windows[position - 1][1] if position else start
            self._gather(weights, module, early, start, end, phase)

    def _gather(self, weights: list[_Weight], module: str, early: int, start: int, end: int, phase: str) -> None:
        """ZeRO-3's whole copies of ``weights`` to ``end``: the first prefetch bucket's worth from ``early``."""
        rank = self.rank
        if not weights:
            return
        fetched = 0
        for weight in weights:
            ahead = fetched + weight.numel <= DEEPSPEED_PREFETCH_BUCKET_ELEMENTS
            fetched += weight.numel
            clock = early if ahead else start
            rank.add(weight.nbytes, "parameters", "all_gather", module=module, phase=phase, step=self.step,
                     alloc_at=rank.at(clock, 4), free_at=rank.at(end, 3) if end > clock else rank.at(end, 5))  # fmt: skip


def _groups(modules: Iterable[str], weights: Iterable[_Weight]) -> dict[str, list[_Weight]]:
    """Weights by the block that holds them; ``""`` gathers the rest (FSDP2's root)."""
    blocks = sorted(set(modules), key=len, reverse=True)
    found: dict[str, list[_Weight]] = defaultdict(list)
    for weight in weights:
        owner = next((m for m in blocks if weight.name.startswith(m + ".")), "")
        found[owner].append(weight)
    return found
