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
- the overheads outside the allocator on one GPU (CUDA context, BLAS workspaces); more GPUs add NCCL's.

The bound costs no trace: one pass over the one-rank trace's storages, then a few integer operations per setting.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import networkx as nx

from vramsim.estimators.assumptions import ModuleLoading, overheads_for, totals
from vramsim.results.strategy import SCHEMES
from vramsim.search.strategy_space import Setting
from vramsim.tracer.graph import storage_nodes
from vramsim.workload.targets import Target

__all__ = ["FloorBound"]

_SHARD_WEIGHTS = frozenset({"ZeRO-3", "FSDP2 grad-op", "FSDP2 full"})
"""Schemes whose data-parallel ranks each hold a shard of the weights between steps."""
_SHARD_GRADIENTS = _SHARD_WEIGHTS | {"ZeRO-2"}
"""Schemes whose data-parallel ranks each hold a shard of the gradients at the optimizer step."""


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

    @classmethod
    def of(cls, graph: nx.MultiDiGraph, target: Target, *, module_loading: ModuleLoading) -> FloorBound:
        """The bound's terms from the one-rank trace ``graph`` on ``target``."""
        storages = dict(storage_nodes(graph))
        weights = sum(a["nbytes"] for a in storages.values() if a["category"] == "parameters" and a["free_at"] is None)
        states = sum(a["nbytes"] for a in storages.values() if a["category"] == "optimizer_states" and a["free_at"] is None)
        units = graph.graph["units"]
        last = max((unit.step for unit in units), default=0)
        inputs = [sid for unit in units if unit.step == last for sid in set(unit.inputs)]
        owned = [sid for sid, count in Counter(inputs).items() if count == 1 and storages[sid]["alloc_at"][0] > 0]
        overheads = overheads_for(target.profile, world_size=1, training=True, module_loading=module_loading)
        return cls(
            weight_bytes=weights,
            optimizer_bytes=states,
            gradient_bytes=_gradients_at_step(graph, storages),
            kept_input_bytes=sum(storages[sid]["nbytes"] for sid in owned),
            fixed_bytes=totals(overheads).device,
        )

    def bytes(self, setting: Setting) -> int:
        """A lower bound of the device memory of ``setting``'s busiest rank."""
        model = setting.tp * setting.pp
        replicas = setting.ep  # expert parallelism splits the experts at least (a weaker split of the whole)
        sharded = setting.scheme in SCHEMES and setting.scheme != "DDP"
        weights = self.weight_bytes // (model * (setting.dp if setting.scheme in _SHARD_WEIGHTS else replicas))
        states = self.optimizer_bytes // (model * (setting.dp if sharded else replicas))
        gradients = self.gradient_bytes // (model * (setting.dp if setting.scheme in _SHARD_GRADIENTS else replicas))
        kept = self.kept_input_bytes // setting.cp if setting.pp == 1 else 0
        return weights + states + max(gradients, kept) + self.fixed_bytes


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
