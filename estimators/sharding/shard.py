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
- HSDP (``hybrid``): FSDP2 full over a shard group of ``shard_group`` ranks, replicated across the
  groups; the replicas all-reduce the gradients' shards in place, so a rank holds what FSDP2 full
  over the group holds.
- Mixed precision (a program traced under torch.autocast): ZeRO and FSDP run their own, not autocast
  (``_Rank._mixed_precision``): FSDP2's ``MixedPrecisionPolicy`` gathers the fp32 shards in the low
  dtype, DeepSpeed's bf16/fp16 mode holds the weights and gradients in it beside fp32 master and
  gradient partitions; autocast's copies of the weights are dropped. DDP keeps autocast.
- CPU offload (``offload``): the model states DeepSpeed ZeRO-Offload or FSDP2's CPUOffloadPolicy
  keep in host memory leave the device and are counted in ``Sharded.host`` (``sharding_offload.py``).
- Expert parallelism among the data-parallel ranks (``expert_parallel``): a routed expert's states are
  divided over the ``expert_shard_size`` ranks holding the same experts (DeepSpeed 0.19.8: MoE groups over
  ``expert_dp_process_group``; torchtitan: ``dp_shard_mod_ep``), the other weights' over every shard rank;
  FSDP2 gathers the experts as a group of their own inside their block (torchtitan's ``apply_fsdp``).

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
from collections.abc import Collection
from dataclasses import dataclass, field
from math import ceil
from typing import Any

import networkx as nx

from vramsim.tracer.graph import saved_edges, storage_node, storage_nodes

from ..assumptions import DEEPSPEED_OVERLAP_COMM_STAGES
from ..expert_parallel import EXPERTS_MODULE, expert_weight
from ..timeline import Block, Position, Timeline, order_blocks
from .offload import offload_to_host
from .plan import ShardingPlan, ddp_bucket_sizes, itemsize, shard_bytes
from .windows import COMMUNICATION, StepWindows, Weight, block_groups

__all__ = ["Sharded", "shard"]

_MODEL_STATE = ("parameters", "gradients", "optimizer_states")


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
    host: dict[str, int] = field(default_factory=dict)
    """Bytes the rank keeps in host memory under CPU offload (not device memory), by kind: parameters,
    gradients, optimizer_states, buffers (``sharding_offload.py``)."""


def shard(graph: nx.MultiDiGraph, timeline: Timeline, plan: ShardingPlan, *, weights: Collection[str] | None = None) -> Sharded:
    """``timeline`` (of the program traced as ``graph``) as one rank of ``plan`` runs it. ``weights``: the
    rank holds only these (a pipeline stage's, ``PipelineSplit.weights``); its buffers, gathers and shards
    are theirs, and the other weights' blocks are left for the stage split to drop."""
    return _Rank(graph, timeline, plan, weights).apply()


class _Rank:
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
        self.model_state: dict[str, int] = dict.fromkeys(_MODEL_STATE, 0)
        self.buffers: dict[str, int] = {}
        self.host: dict[str, int] = {}
        self.notes: list[str] = []
        self.gathered = 0
        self.gather_itemsize: dict[str, int] = {}
        """Weights the program casts under autocast, gathered in that dtype instead (``_mixed_precision``)."""
        self.held_itemsize: dict[int, int] = {}
        """Traced weights and gradients DeepSpeed's bf16/fp16 mode holds in the low dtype instead (``_mixed_precision``)."""
        self.phase_bounds: dict[int, tuple[int, int]] = {}
        """Step -> (last clock of its forward, first clock of its backward)."""
        self.optimizer_span: dict[int, tuple[int, int]] = {}
        """Step -> (first, last) clock of its optimizer step."""
        forward_end: dict[int, int] = defaultdict(int)
        backward_start: dict[int, int] = {}
        for node, attrs in graph.nodes(data=True):
            if node[0] == "op" and attrs["phase"] == "forward":
                forward_end[attrs["step"]] = max(forward_end[attrs["step"]], attrs["clock_after"])
            elif node[0] == "op" and attrs["phase"] == "backward":
                step = attrs["step"]
                backward_start[step] = min(backward_start.get(step, attrs["clock_after"]), attrs["clock_after"])
            elif node[0] == "op" and attrs["phase"] == "optimizer":
                first, last = self.optimizer_span.get(attrs["step"], (attrs["clock_after"], attrs["clock_after"]))
                self.optimizer_span[attrs["step"]] = (min(first, attrs["clock_after"]), max(last, attrs["clock_after"]))
        for step, end in forward_end.items():
            self.phase_bounds[step] = (end, backward_start.get(step, end + 1))
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

    # -- the transform --------------------------------------------------------------------------

    def apply(self) -> Sharded:
        last_step = len(self.graph.graph["step_clocks"]) - 1
        if self.plan.zero or self.plan.shards_parameters:
            self._mixed_precision()
        self._shard_states()
        if self.plan.zero or self.plan.fsdp != "no":
            self._training_windows()
            self._master_partition()
        elif self.plan.gpus > 1 and any(self.grads.values()):
            self._ddp_buckets()
        if self.plan.offload != "none":
            offload_to_host(self)
        for key, block in enumerate(self.blocks):  # weights as held (not gathered), optimizer states, one step's gradients
            if not self.holds(key):
                continue
            if (
                (block.category == "parameters" and block.op != "all_gather")
                or block.category == "optimizer_states"
                or (block.category == "gradients" and block.step in (-1, last_step))
            ):
                self.model_state[block.category] += block.nbytes
        timeline = order_blocks(self.blocks, self.graph.graph["step_clocks"])
        return Sharded(
            plan=self.plan,
            timeline=timeline,
            model_state=self.model_state,
            gathered_elements=self.gathered,
            buffers=self.buffers,
            notes=self.notes,
            host=self.host,
        )

    def _shard_states(self) -> None:
        """Weights, optimizer states and the optimizer step's temporaries shrink to the rank's share."""
        for sid in range(self.traced):
            block = self.blocks[sid]
            if block.category == "optimizer_states" and self.plan.shards_optimizer:
                block.nbytes = self.shard_of(sid)
            elif block.category == "temporaries" and block.phase == "optimizer" and self.plan.shards_optimizer:
                block.nbytes = ceil(block.nbytes / self.ranks_of(self.attrs[sid]["owner"]))  # the step runs on the shard
            elif (
                block.category == "parameters"
                and self.attrs[sid]["owner"] in self.weights
                and self.sharded_weight(self.weights[self.attrs[sid]["owner"]])
            ):
                block.nbytes = self.shard_of(sid)

    def _mixed_precision(self) -> None:
        """Mixed precision as the sharding frameworks run it, not as torch.autocast does. Autocast casts a
        weight (``aten._to_copy`` of it) at its first use, caches the copy until the forward ends and
        autograd saves it for backward: a copy of every weight lives from its forward to its backward.
        FSDP2's ``MixedPrecisionPolicy(param_dtype=...)`` keeps fp32 shards and gathers them in the low
        dtype; DeepSpeed's bf16/fp16 mode holds the weights and their gradients in the low dtype (whole
        for stages 1-2, partitioned for stage 3), an fp32 master partition (``_master_partition``) and,
        for stages 1-2, an fp32 copy of the gradient partition during the step (``single_grad_partition``);
        stage 3 reduces into its fp32 partitions. Neither runs autocast: the traced casts of those weights
        (recomputed ones too) are dropped and the gathered copy is the only one."""
        casts = self._autocast_weight_casts()
        if not casts:
            return
        low = next(iter(casts.values()))  # autocast's one dtype: the frameworks cast every weight to it
        self.gather_itemsize = {w.name: low for w in self.weights.values() if self.plan.zero or self.sharded_weight(w)}
        for key, block in enumerate(self.blocks):
            source = key if key < self.traced else block.copy_of
            if source is not None and source in casts:
                block.nbytes = 0
        if self.plan.zero:
            for sid, attrs in enumerate(self.attrs):
                weight = self.weights.get(attrs["owner"])
                own = attrs["category"] == "parameters" and weight is not None and weight.sid == sid
                if own or (attrs["category"] == "gradients" and self.plan.zero < 3):
                    self.held_itemsize[sid] = low
                    self.blocks[sid].nbytes = self.blocks[sid].nbytes // itemsize(attrs) * low
            if self.plan.zero < 3 and self.plan.offload == "none":  # offloaded, the host steps on it
                self._fp32_gradient_partition()
            self.notes.append(
                f"DeepSpeed's bf16/fp16 mode for the autocast dtype: {len(self.gather_itemsize)} weights and their "
                "gradients held in it, "
                "an fp32 master partition and fp32 gradient partitions for the optimizer, no autocast copies; the traced "
                "activations keep autocast's dtypes (the residual stream stays fp32 where DeepSpeed computes in the low dtype)"
            )
            return
        self.notes.append(
            "mixed precision as FSDP2's MixedPrecisionPolicy runs it: "
            f"{len(self.gather_itemsize)} sharded weights gathered in the autocast dtype, no autocast copies of them; "
            "the traced activations keep autocast's dtypes (the residual stream stays fp32 where FSDP2 computes in the "
            "low dtype: on a tiny Llama, +16% over torch's FSDP2 with MixedPrecisionPolicy run for real)"
        )

    def _autocast_weight_casts(self) -> dict[int, int]:
        """Traced storages that are autocast's copies of a weight (a ``_to_copy`` reading the weight's
        storage), by sid, with the bytes per element of the dtype cast to."""
        graph = self.graph
        casts: dict[int, int] = {}
        for sid, attrs in enumerate(self.attrs):
            if attrs["op"] != "aten._to_copy" or attrs["category"] in _MODEL_STATE:
                continue
            producer = next(u for u, _, key in graph.in_edges(storage_node(sid), keys=True) if key == "produced")
            read = [u[1] for u, _, key in graph.in_edges(producer, keys=True) if key == "read"]
            weight = self.weights.get(self.attrs[read[0]]["owner"]) if len(read) == 1 else None
            if weight is not None and weight.sid == read[0] and (self.plan.zero or self.sharded_weight(weight)):
                casts[sid] = itemsize(attrs)
        return casts

    def _fp32_gradient_partition(self) -> None:
        """DeepSpeed stages 1-2 step on an fp32 copy of the rank's gradient partition (stage_1_and_2.py
        ``single_grad_partition``), made and dropped within each optimizer step."""
        trainable = self.trainable_weights()
        nbytes = sum(4 * ceil(w.numel / self.ranks_of(w.name)) for w in self.weights.values() if w.name in trainable)
        for step, (first, last) in self.optimizer_span.items():
            self.add(
                nbytes,
                "temporaries",
                "zero.fp32_grad_partition",
                phase="optimizer",
                step=step,
                alloc_at=self.at(first, 2),
                free_at=self.at(last, 3),
            )

    def _master_partition(self) -> None:
        """DeepSpeed's optimizer updates an fp32 copy of the rank's partition of the trainable weights:
        stages 1-2 always clone it (stage_1_and_2.py ``single_partition_of_fp32_groups``), stage 3 only
        when the weights are not fp32 already (stage3.py ``fp32_partitioned_groups_flat``); offloaded, it is
        always a copy, on the host."""
        trainable = self.trainable_weights()
        weights = [w for w in self.weights.values() if w.name in trainable]
        if not self.plan.zero or not weights:
            return
        fp32 = all(self.element_size(w.sid) == 4 for w in weights)
        nbytes = sum(4 * ceil(w.numel / self.ranks_of(w.name)) for w in weights)
        if self.plan.offload != "none":
            self.host["parameters"] = self.host.get("parameters", 0) + nbytes
            return
        if self.plan.zero == 3 and fp32:
            return
        self.add(nbytes, "parameters", "zero.fp32_master_partition", alloc_at=self.at(0, 4), free_at=None)
        if not all(itemsize(self.attrs[w.sid]) == 4 for w in weights):
            self.notes.append(
                "DeepSpeed keeps optimizer states with its fp32 master partition; the traced optimizer "
                "keeps them in the weights' dtype (DeepSpeed's bf16/fp16 modes are not modelled)"
            )

    def _ddp_buckets(self) -> None:
        """DDP's Reducer: buckets over the trainable weights in reverse order, kept for the run."""
        trainable = self.trainable_weights()
        weights = sorted(self.weights.values(), key=lambda w: w.sid, reverse=True)
        sizes = [w.nbytes for w in weights if w.name in trainable]
        category = "gradients" if self.plan.bucket_view else COMMUNICATION
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
        experts = self._expert_calls() if self.plan.fsdp != "no" and self.plan.expert_parallel > 1 else {}
        modules = [unit.module for unit in units] + sorted({module for module, _ in experts})
        groups = block_groups(modules, self.weights.values())
        for step, (first_clock, _) in enumerate(self.graph.graph["step_clocks"]):
            calls = [(i, unit) for i, unit in enumerate(units) if unit.step == step]
            grads = self.grads.get(step, [])
            if not grads:
                continue
            window = StepWindows(
                self,
                step,
                first_clock,
                calls,
                unpacks,
                groups,
                experts={module: clocks for (module, each), clocks in experts.items() if each == step},
            )
            if self.plan.shards_parameters:  # first: a block reshards before its reduce-scatter input is made
                window.gathers()
            window.gradients()
            self._reduce_buckets(step, grads)

    def _expert_calls(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(experts module, step) -> first and last clock of its forward. Under expert parallelism torchtitan wraps
        each MoE layer's experts in their own ``fully_shard`` over the ranks holding the same experts
        (``apply_fsdp``), inside their block's: gathered around their own call, resharded after it."""
        experts = {weight.name.rsplit(".", 1)[0] for weight in self.weights.values() if expert_weight(weight.name)}
        calls: dict[tuple[str, int], tuple[int, int]] = {}
        for node, attrs in self.graph.nodes(data=True):
            if node[0] != "op" or attrs["phase"] != "forward":
                continue
            name: str = attrs["module"]
            end = name.find(EXPERTS_MODULE) + len(EXPERTS_MODULE)
            module = name[:end]  # the experts module an op runs in, or inside
            if module in experts and name[end : end + 1] in ("", "."):
                key, clock = (module, attrs["step"]), attrs["clock_after"]
                first, last = calls.get(key, (clock, clock))
                calls[key] = (min(first, clock), max(last, clock))
        return calls

    def _reduce_buckets(self, step: int, grads: list[int]) -> None:
        """DeepSpeed's reduce (ipg) bucket: stage 1/2 for backward, stage 3 for the run."""
        if not self.plan.zero:
            return
        element = max(self.element_size(self.weights[self.attrs[sid]["owner"]].sid) for sid in grads)  # the weights' dtype
        nbytes = self.plan.zero_settings.reduce_bucket * element
        if self.plan.zero == 3:  # one bucket per gradient dtype, made at start-up
            if step == 0:
                self.add(nbytes, COMMUNICATION, "zero.reduce_bucket", alloc_at=self.at(0, 4), free_at=None)
                self.buffers["ZeRO reduce bucket"] = nbytes
            return
        last = max(self.blocks[sid].alloc_at[0] for sid in grads)
        # a pipeline reduces after the last micro-batch (DeepSpeed's PipelineEngine ``_exec_reduce_grads``)
        first = last if self.plan.pipelined else min(self.blocks[sid].alloc_at[0] for sid in grads)
        for _ in range(2 if self.plan.zero in DEEPSPEED_OVERLAP_COMM_STAGES else 1):  # overlap_comm: double buffer
            self.add(
                nbytes,
                COMMUNICATION,
                "zero.reduce_bucket",
                phase="backward",
                step=step,
                alloc_at=self.at(first, 2),
                free_at=self.at(last, 3),
            )
        self.buffers["ZeRO reduce bucket"] = nbytes
