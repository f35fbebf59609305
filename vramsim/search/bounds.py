"""The least device memory a setting's rank can take, read off the one-rank trace: settings above the usable memory
are ruled out without tracing their layout.

Each term is a quantity of the traced program that every setting still holds, divided by no more ranks than any
layout splits it over, and the terms of one moment are added, so their sum is a lower bound of what the setting's
busiest rank holds at that moment, hence of its peak:

- the weights and optimizer states live at the end of the step (``free_at`` None), held at every moment: every layout
  keeps each of their bytes on some rank at once (tensor parallelism splits a weight at most tp ways and keeps norms
  whole, a pipeline splits the layers, expert parallelism the experts), so the busiest rank holds at least their sum
  over the ranks they are spread on. The data-parallel ranks split only what the scheme shards: ZeRO-1 and ZeRO-2
  keep every weight whole on each rank (DeepSpeed partitions their optimizer states, and ZeRO-2 the gradients),
  ZeRO-3 and FSDP2 shard weights too; DDP splits nothing;
- at the end of backward, before the optimizer step: the last step's gradients, alive together with the weights and
  optimizer states, spread as the scheme shards them (ZeRO-2, ZeRO-3 and FSDP2 over the data-parallel ranks; DDP and
  ZeRO-1 hold them whole);
- or, at the end of the last forward: the inputs each checkpointed block keeps (its own, not shared with another
  block: a decoder layer's hidden states), alive together whatever the checkpointing: a context-parallel rank holds
  1/cp of their tokens, a tensor-parallel rank the whole hidden size (no sequence parallelism); counted without a
  pipeline only, whose micro-batches may be smaller than the batch;
- what the libraries keep for the run: DeepSpeed's fp32 master partition of the trained weights (ZeRO-1 and ZeRO-2
  always, ZeRO-3 where no trained weight is held in fp32: ``states.master_partition``) over the data-parallel ranks,
  ZeRO-3's reduce bucket (``reduce_bucket_size`` elements, at the narrowest width a gradient is held in), DDP's
  gradient buckets (as many bytes as the trained weights; they hold every gradient, so DDP's gradient term is 0);
- under FSDP2 grad-op (``reshard_after_forward=False``), at the end of forward with the kept inputs: every weight
  gathered at once (each at the narrower of its traced and the autocast width), over tp and ep, without a pipeline;
- the overheads outside the allocator on one GPU (CUDA context, BLAS workspaces) and, on more than one, NCCL's
  buffers (``assumptions.overheads_for``, what the analysis adds for any world size above 1).

The bound costs no trace: one pass over the one-rank trace's storages, then a few integer operations per setting.

Under ZeRO with an autocast dtype narrower than the traced weights, DeepSpeed's bf16/fp16 mode holds the weights, and
for stages 1-2 the gradients, in the autocast dtype (``estimators/sharding/precision.py``): those terms are counted
at that width. FSDP2 keeps its shards, and DDP everything, at the traced width.

``TracedBound`` is tighter, for settings without a pipeline or expert parallelism: it follows every moment of the
last step's forward and backward in a traced rank program (tp_r, cp_r) under each uniform checkpointing choice (the
choice's what-if of that trace). A setting of tp and cp (cp a multiple of cp_r) runs the same program on a
``seq_len / cp`` slice with 1/tp of the heads and of the MLP (``workload/build.py``), plus what its scheme and
layout add (gathered weights, buckets, all-reduce and ring buffers), so each storage the reference holds at a moment
has a counterpart the setting holds at the same point of its program, no smaller than:

- a gradient: itself over the data-parallel ranks that shard it (a shard lives from the reduce-scatter to the
  step), or whole (DDP, ZeRO-1); at the autocast width for ZeRO-1/2, as above;
- an activation or temporary: itself, divided by tp / tp_r where the setting's tensor parallelism is wider (a
  tensor is whole or split along heads, the MLP's width or the vocabulary; a narrower one splits less, so it is at
  least the reference's), and divided once by cp / cp_r if one of its dimensions is a multiple of the reference's
  tokens per sequence (the token dimension, or a flattened batch of them; a hidden size that happens to be one is
  divided too, which only lowers the bound). A tensor has one token dimension only where attention ran as SDPA,
  whose kernels hold no tokens x tokens matrix (the kernels context parallelism requires): without SDPA the
  token-sized terms are left out of context-parallel settings. Left out as well: autocast's copies of weights
  (a ``_to_copy`` reading a weight; ZeRO and FSDP2 drop them), a dimension one short of the tokens (the shifted labels, which
  do not scale by cp) and blocks a what-if adds that copy no traced storage.

- what its scheme's library holds then beyond the program's tensors (``gathers.py``): FSDP2's and ZeRO-3's gathered
  weights of the root and of the block running (FSDP2 grad-op: of every block between its forward and its
  backward), FSDP2's reduce-scatter input, ZeRO-1/2's reduce bucket through backward; weights, so divided by
  tp / tp_r as the activations and not by cp.

So at each moment the setting holds at least the sum of those terms, and at all moments the weights, optimizer states,
the libraries' own buffers and the overheads of ``FloorBound``: the largest sum over the step is a lower bound of its
peak. ``auto`` is weighed as ``full``, the least a group's program holds allocated at each moment (the device figure
need not follow: the allocator's cache is not bounded). Any other plan, such as one of ``auto``'s
``first:F+selective:(L - F)``, is bounded the same way by its own what-if of the reference (``plan_bytes``, made when
first asked): the argument above holds for any plan the setting's program and the reference both run. One what-if
per choice per reference, then a vectorised maximum per (choice, shard, cp, scheme).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from vramsim.estimators.assumptions import (
    DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD,
    DEEPSPEED_REDUCE_BUCKET_ELEMENTS,
    ModuleLoading,
    overheads_for,
    totals,
)
from vramsim.estimators.checkpointing import what_if
from vramsim.estimators.checkpointing_plan import CheckpointPlan, parse_checkpointing
from vramsim.estimators.sharding.plan import itemsize
from vramsim.estimators.timeline import Timeline
from vramsim.results.strategy import SCHEMES, Setting
from vramsim.search.gathers import HOLDING_SCHEMES, Windows, gather_windows, held_by_row
from vramsim.search.strategy_space import CHECKPOINTING_BY_RECOMPUTE
from vramsim.tracer.graph import storage_node, storage_nodes
from vramsim.workload.targets import Target

__all__ = ["FloorBound", "TracedBound"]

_SHARD_WEIGHTS = frozenset({"ZeRO-3", "FSDP2 grad-op", "FSDP2 full"})
"""Schemes whose data-parallel ranks each hold a shard of the weights between steps."""
_SHARD_GRADIENTS = _SHARD_WEIGHTS | {"ZeRO-2"}
"""Schemes whose data-parallel ranks each hold a shard of the gradients at the optimizer step."""
_DEEPSPEED = frozenset({"ZeRO-1", "ZeRO-2", "ZeRO-3"})
"""Schemes whose bf16/fp16 mode holds the weights in the autocast dtype."""
_LOW_GRADIENTS = frozenset({"ZeRO-1", "ZeRO-2"})
"""Schemes that also hold the (whole or bucketed) gradients in the autocast dtype."""
_MODEL_STATES = frozenset({"parameters", "optimizer_states", "buffers"})
"""Categories ``FloorBound`` counts (or, buffers, leaves out) for every moment."""


@dataclass(frozen=True, slots=True)
class FloorBound:
    """What the one-rank trace says every setting holds."""

    weight_bytes: int
    """Weights live at the end of the one-rank step."""
    optimizer_bytes: int
    """Optimizer states live at the end of the one-rank step."""
    gradient_bytes: int
    """Gradients alive at the end of the last backward."""
    kept_input_bytes: int
    """The inputs the last step's checkpointed blocks keep, each block's own."""
    fixed_bytes: int
    """Device memory outside the allocator on one GPU of the target."""
    narrow: float = 1.0
    """The autocast dtype's width over the traced weights' (1 without a narrower autocast)."""
    gathered_bytes: int = 0
    """Every weight gathered at once, each at the narrower of its traced and the autocast width (FSDP2 grad-op's
    unsharded weights at the end of forward)."""
    bucket_bytes: int = 0
    """DeepSpeed's reduce bucket, at the narrowest width a trained weight's gradient is held in."""
    nccl_bytes: int = 0
    """Device memory outside the allocator that more than one GPU adds (NCCL's buffers)."""
    master_bytes: int = 0
    """DeepSpeed's fp32 master copy of the trained weights (``states.master_partition``), whole."""
    trained_bytes: int = 0
    """The trained weights' bytes as traced: DDP's gradient buckets, kept for the run, hold as much."""
    master_in_zero3: bool = False
    """Whether ZeRO-3 keeps that copy too: no trained weight is traced in fp32, so none is held in it."""

    @classmethod
    def of(
        cls,
        graph: nx.MultiDiGraph,
        target: Target,
        *,
        module_loading: ModuleLoading,
        autocast_itemsize: int | None = None,
        reduce_bucket: int = DEEPSPEED_REDUCE_BUCKET_ELEMENTS,
    ) -> FloorBound:
        """The bound's terms from the one-rank trace ``graph`` on ``target``, traced under ``autocast_itemsize``, with
        DeepSpeed's ``reduce_bucket`` elements."""
        storages = dict(storage_nodes(graph))
        params = [a for a in storages.values() if a["category"] == "parameters" and a["free_at"] is None]
        weights = sum(a["nbytes"] for a in params)
        states = sum(a["nbytes"] for a in storages.values() if a["category"] == "optimizer_states" and a["free_at"] is None)
        widest = max((a["nbytes"] // max(1, _numel(a["shape"])) for a in params if _numel(a["shape"])), default=0)
        gathered = sum(a["nbytes"] // itemsize(a) * min(itemsize(a), autocast_itemsize or itemsize(a)) for a in params)
        units = graph.graph["units"]
        last = max((unit.step for unit in units), default=0)
        inputs = [sid for unit in units if unit.step == last for sid in set(unit.inputs)]
        owned = [sid for sid, count in Counter(inputs).items() if count == 1 and storages[sid]["alloc_at"][0] > 0]
        overheads = overheads_for(target.profile, world_size=1, training=True, module_loading=module_loading)
        shared = overheads_for(target.profile, world_size=2, training=True, module_loading=module_loading)
        trained = {a["owner"] for a in storages.values() if a["category"] == "gradients"}
        widths = [itemsize(a) for a in params if a["owner"] in trained]
        narrowest = min([*widths, autocast_itemsize or min(widths, default=0)], default=0)
        master = sum(4 * (a["nbytes"] // itemsize(a)) for a in params if a["owner"] in trained)
        return cls(
            weight_bytes=weights,
            optimizer_bytes=states,
            gradient_bytes=_gradients_at_step(graph, storages),
            kept_input_bytes=sum(storages[sid]["nbytes"] for sid in owned),
            fixed_bytes=totals(overheads).device,
            narrow=min(1.0, autocast_itemsize / widest) if autocast_itemsize and widest else 1.0,
            gathered_bytes=gathered,
            bucket_bytes=reduce_bucket * narrowest,
            nccl_bytes=totals(shared).device - totals(overheads).device,
            master_bytes=master,
            trained_bytes=sum(a["nbytes"] for a in params if a["owner"] in trained),
            master_in_zero3=bool(widths) and max(widths) < 4,
        )

    def bytes(self, setting: Setting) -> int:
        """A lower bound of the device memory of ``setting``'s busiest rank."""
        kept = self.kept_input_bytes // setting.cp if setting.pp == 1 else 0
        if setting.scheme == "FSDP2 grad-op" and setting.pp == 1:  # every block's weights stay gathered to backward
            kept += self.gathered_bytes // (setting.tp * setting.ep)
        return self.held_bytes(setting) + max(self.gradient_share(setting, self.gradient_bytes), kept)

    def held_bytes(self, setting: Setting) -> int:
        """The weights, optimizer states and overheads ``setting``'s busiest rank holds at every moment."""
        model = setting.tp * setting.pp
        replicas = setting.ep  # expert parallelism splits the experts at least (a weaker split of the whole)
        sharded = setting.scheme in SCHEMES and setting.scheme != "DDP"
        width = self.narrow if setting.scheme in _DEEPSPEED else 1.0
        weights = int(self.weight_bytes * width) // (model * (setting.dp if setting.scheme in _SHARD_WEIGHTS else replicas))
        states = self.optimizer_bytes // (model * (setting.dp if sharded else replicas))
        bucket = self.bucket_bytes if setting.scheme == "ZeRO-3" else 0  # made at start-up, kept for the run
        kept_master = setting.scheme in _LOW_GRADIENTS or (setting.scheme == "ZeRO-3" and self.master_in_zero3)
        master = self.master_bytes // (model * setting.dp) if kept_master else 0
        buckets = self.trained_bytes // (model * replicas) if setting.scheme == "DDP" else 0
        held = weights + states + bucket + master + buckets
        return held + self.fixed_bytes + (self.nccl_bytes if setting.gpus > 1 else 0)

    def gradient_share(self, setting: Setting, gradient_bytes: float) -> int:
        """``gradient_bytes`` of the one-rank program, as ``setting``'s busiest rank holds them."""
        return int(gradient_bytes * self.gradient_factor(setting) / (setting.tp * setting.pp))

    def gradient_factor(self, setting: Setting) -> float:
        """What of a gradient a data-parallel rank of ``setting`` holds: its shard, at the width the scheme keeps; none
        under DDP, whose buckets (``held_bytes``) hold every gradient (a ``.grad`` may be a view of them)."""
        if setting.scheme == "DDP":
            return 0.0
        width = self.narrow if setting.scheme in _LOW_GRADIENTS else 1.0
        return width / (setting.dp if setting.scheme in _SHARD_GRADIENTS else setting.ep)


@dataclass(frozen=True, slots=True)
class TracedBound:
    """What one traced rank program says, moment by moment, every setting it covers holds (the module's docstring)."""

    tp: int
    cp: int
    sdpa: bool
    """Attention ran as SDPA: a token-sized tensor has one token dimension."""
    sweeps: dict[str, tuple[np.ndarray, ...]]
    """By checkpointing choice (the uniform ones, then each plan asked of ``plan_bytes``): gradient, token-sized and
    other bytes live after each event of the last step's forward and backward, then what each of ``HOLDING_SCHEMES``
    holds beyond them then (``gathers.py``)."""
    graph: nx.MultiDiGraph | None = field(default=None, repr=False, compare=False)
    """The traced program, for the what-if of a plan asked later (``auto``'s ``first:F+selective:(L - F)``)."""
    tokens: int = 0
    """The reference's tokens per sequence, for those what-ifs."""
    windows: Windows = field(default_factory=dict, repr=False, compare=False)
    _peaks: dict[tuple[str, float, int, str], float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        graph: nx.MultiDiGraph,
        *,
        tp: int,
        cp: int,
        tokens: int,
        autocast_itemsize: int | None = None,
        persistence_threshold: int = DEEPSPEED_PARAM_PERSISTENCE_THRESHOLD,
        bucket_bytes: int = 0,
    ) -> TracedBound:
        """The bound of the program ``graph`` traced for ``tp`` and ``cp`` at ``tokens`` per sequence, under autocast
        to ``autocast_itemsize`` bytes, with ZeRO-3's ``persistence_threshold``."""
        windows = gather_windows(
            graph, autocast_itemsize=autocast_itemsize, persistence_threshold=persistence_threshold, bucket_bytes=bucket_bytes
        )
        sdpa = any(node[0] == "op" and "scaled_dot_product" in attrs["name"] for node, attrs in graph.nodes(data=True))
        bound = cls(tp=tp, cp=cp, sdpa=sdpa, sweeps={}, graph=graph, tokens=tokens, windows=windows)
        for choice in CHECKPOINTING_BY_RECOMPUTE:
            bound._swept(parse_checkpointing(choice))
        return bound

    def _swept(self, plan: CheckpointPlan) -> bool:
        """Whether ``plan``'s sweep is known, making it from its what-if of the traced program if need be; False where
        the program has no blocks to checkpoint (``FloorBound`` alone weighs the plan)."""
        if plan.spec in self.sweeps:
            return True
        if self.graph is None:
            return False
        try:
            timeline = what_if(self.graph, plan).timeline
        except (ValueError, NotImplementedError):
            return False
        *columns, clocks = _sweep(self.graph, timeline, self.tokens)
        held = (held_by_row(self.windows[scheme], clocks) for scheme in HOLDING_SCHEMES)
        self.sweeps[plan.spec] = (*columns, *held)
        return True

    def bytes(self, setting: Setting, floor: FloorBound) -> int | None:
        """A lower bound of ``setting``'s busiest rank, or None where this program does not cover it."""
        choice = "full" if setting.checkpointing == "auto" else setting.checkpointing
        if choice not in self.sweeps:
            return None
        return self.plan_bytes(setting, floor, parse_checkpointing(choice))

    def plan_bytes(self, setting: Setting, floor: FloorBound, plan: CheckpointPlan) -> int | None:
        """A lower bound of ``setting``'s busiest rank under ``plan`` (any choice ``what_if`` takes, such as ``auto``'s
        ``first:F+selective:(L - F)``), or None where this program does not cover it: the same argument as for the
        uniform choices, the what-if of ``plan`` on the reference being the program the setting runs under ``plan``."""
        if setting.pp > 1 or setting.ep > 1 or setting.cp % self.cp or not self._swept(plan):
            return None
        choice = plan.spec
        shard = floor.gradient_factor(setting)
        splits = setting.cp // self.cp
        key = (choice, shard, splits, setting.scheme)
        if key not in self._peaks:
            gradients, tokens, other, *gathered = self.sweeps[choice]
            scaled = tokens / splits if self.sdpa or splits == 1 else 0.0
            held = dict(zip(HOLDING_SCHEMES, gathered, strict=True)).get(setting.scheme, 0.0)
            self._peaks[key] = float(np.max(gradients * shard + scaled + other + held, initial=0.0))
        return floor.held_bytes(setting) + int(self._peaks[key] * min(1.0, self.tp / setting.tp))


def _sweep(graph: nx.MultiDiGraph, timeline: Timeline, tokens: int) -> tuple[np.ndarray, ...]:
    """Gradient, token-sized and other bytes live after each event of the last step, up to its optimizer step, and
    each event's clock."""
    attrs = [a for _, a in storage_nodes(graph)]
    casts = _weight_casts(graph, attrs)
    kinds = []  # per block: None left out, else 0 gradient, 1 token-sized, 2 other
    for key, block in enumerate(timeline.blocks):
        source = key if key < len(attrs) else block.copy_of
        kinds.append(None if source is None or source in casts else _kind(block.category, attrs[source], tokens))
    first, last = timeline.steps[-1]
    live = [0, 0, 0]
    rows: list[tuple[int, int, int, int]] = []
    for index, (key, is_alloc) in enumerate(timeline.events[: last + 1]):
        block = timeline.blocks[key]
        if index >= first and is_alloc and block.phase == "optimizer":
            break
        kind = kinds[key]
        if kind is not None:
            live[kind] += block.nbytes if is_alloc else -block.nbytes
        if index >= first:
            at = block.alloc_at if is_alloc else block.free_at
            assert at is not None, "a free event's block has a free position"
            rows.append((live[0], live[1], live[2], at[0]))
    table = np.array(rows or [(0, 0, 0, 0)], dtype=np.float64)
    return table[:, 0], table[:, 1], table[:, 2], table[:, 3]


def _kind(category: str, source: dict, tokens: int) -> int | None:
    """How a block of ``category`` in the image of storage ``source`` scales to another setting (the docstring)."""
    if category == "gradients":
        return 0
    if category in _MODEL_STATES or source["category"] in _MODEL_STATES:
        return None
    dims = tuple(source["shape"])
    if any(d and d % tokens == 0 for d in dims):
        return 1
    if any((d + 1) % tokens == 0 for d in dims):
        return None
    return 2


def _weight_casts(graph: nx.MultiDiGraph, attrs: list[dict]) -> set[int]:
    """Storages made by a ``_to_copy`` that reads a weight: autocast's copies of weights, which ZeRO and FSDP2 drop
    (``estimators/sharding/precision.py`` drops those whose one read is the weight, a subset). Casts of activations
    stay: under no checkpointing autograd saves each matmul's low-precision input."""
    found = set()
    for sid, a in enumerate(attrs):
        if a["op"] != "aten._to_copy":
            continue
        for producer, _, key in graph.in_edges(storage_node(sid), keys=True):
            if key != "produced":
                continue
            reads = [u[1] for u, _, k in graph.in_edges(producer, keys=True) if k == "read"]
            if any(attrs[r]["category"] == "parameters" for r in reads):
                found.add(sid)
    return found


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def _gradients_at_step(graph: nx.MultiDiGraph, storages: dict[int, dict]) -> int:
    """Gradient bytes alive right after the last step's last backward op (before the optimizer reads them)."""
    ops = [attrs for node, attrs in graph.nodes(data=True) if node[0] == "op" and attrs["phase"] == "backward"]
    if not ops:
        return 0
    last = max(op["step"] for op in ops)
    moment = max(op["clock_after"] for op in ops if op["step"] == last)
    return sum(
        attrs["nbytes"]
        for attrs in storages.values()
        if attrs["category"] == "gradients"
        and attrs["alloc_at"][0] <= moment
        and (attrs["free_at"] is None or attrs["free_at"][0] > moment)
    )
