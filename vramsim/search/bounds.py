"""The least device memory a setting's rank can take, read off the one-rank trace: settings above the usable memory
are ruled out without tracing their layout.

Each term is a quantity of the traced program that every setting still holds, divided by no more ranks than any
layout splits it over, so the sum is a lower bound of what the setting's busiest rank holds at one moment:

- the weights and optimizer states live at the end of the step (``free_at`` None): every layout keeps each of their
  bytes on some rank at once (tensor parallelism splits a weight at most tp ways and keeps norms whole, a pipeline
  splits the layers, ZeRO and FSDP shard over the data-parallel ranks, expert parallelism splits the experts), so
  the busiest rank holds at least their sum over the ranks they are spread on;
- the inputs each checkpointed block keeps (its own, not shared with another block: a decoder layer's hidden
  states), alive together at the end of forward whatever the checkpointing: a context-parallel rank holds 1/cp of
  their tokens, a tensor-parallel rank the whole hidden size (no sequence parallelism); counted without a pipeline
  only, whose micro-batches may be smaller than the batch;
- the overheads outside the allocator on one GPU (CUDA context, BLAS workspaces); more GPUs add NCCL's.
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


@dataclass(frozen=True, slots=True)
class FloorBound:
    """What the one-rank trace says every setting holds."""

    state_bytes: int
    """Weights and optimizer states live at the end of the one-rank step."""
    kept_input_bytes: int
    """The inputs the last step's checkpointed blocks keep, each block's own."""
    fixed_bytes: int
    """Device memory outside the allocator on one GPU of the target."""

    @classmethod
    def of(cls, graph: nx.MultiDiGraph, target: Target, *, module_loading: ModuleLoading) -> FloorBound:
        """The bound's terms from the one-rank trace ``graph`` on ``target``."""
        storages = dict(storage_nodes(graph))
        state = sum(
            attrs["nbytes"]
            for attrs in storages.values()
            if attrs["category"] in ("parameters", "optimizer_states") and attrs["free_at"] is None
        )
        units = graph.graph["units"]
        last = max((unit.step for unit in units), default=0)
        inputs = [sid for unit in units if unit.step == last for sid in set(unit.inputs)]
        owned = [sid for sid, count in Counter(inputs).items() if count == 1 and storages[sid]["alloc_at"][0] > 0]
        overheads = overheads_for(target.profile, world_size=1, training=True, module_loading=module_loading)
        return cls(
            state_bytes=state,
            kept_input_bytes=sum(storages[sid]["nbytes"] for sid in owned),
            fixed_bytes=totals(overheads).device,
        )

    def bytes(self, setting: Setting) -> int:
        """A lower bound of the device memory of ``setting``'s busiest rank."""
        spread = setting.tp * setting.pp * (setting.dp if setting.scheme in SCHEMES and setting.scheme != "DDP" else setting.ep)
        kept = self.kept_input_bytes // setting.cp if setting.pp == 1 else 0
        return self.state_bytes // spread + kept + self.fixed_bytes
