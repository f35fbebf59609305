"""Advice from the one trace: the other checkpointing choices, over several GPUs sharding the state, and the
allocator's expandable segments."""

from __future__ import annotations

import dataclasses
from typing import Any

from vramsim.analysis.device_memory import DeviceMemory
from vramsim.analysis.whatifs import Analysis, checkpointing_choices
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing_plan import CheckpointPlan, parse_checkpointing
from vramsim.results.advice import Advice
from vramsim.workload.targets import Target

__all__ = ["ALLOCATOR_CHANGE", "SHARDING_CHANGES", "graph_advice"]

SHARDING_CHANGES: tuple[dict[str, Any], ...] = ({"zero": 1}, {"zero": 2}, {"zero": 3}, {"fsdp": "full"})
"""Over several GPUs without sharding: the schemes offered, each a what-if over the same graph."""
ALLOCATOR_CHANGE: dict[str, Any] = {"expandable_segments": True}
"""The caching allocator's setting offered (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``): the same graph
replayed with growing segments, which saves what fragmentation reserves beyond the allocated peak."""


def graph_advice(analysis: Analysis, config: SimulationConfig, target: Target, memory: DeviceMemory) -> list[Advice]:
    """What to change first, each computed from this trace's graph with what it saves on this run: the other
    checkpointing choices (training), over several GPUs sharding the training state, and the allocator's
    expandable segments (where PyTorch honours them, they save only what the replay shows); nothing already set,
    nothing the target refuses (``checkpointing_choices``), nothing that saves nothing, least device memory first.
    Changes that alter the traced program (weight dtype, optimizer, sizes) need another trace:
    ``vramsim/search/advice.py``."""
    variants: list[tuple[dict[str, Any], CheckpointPlan, Analysis]] = []
    if config.task == "train" and config.checkpointing != "all":
        plan = parse_checkpointing(config.checkpointing)
        variants += [  # a compiled trace ran its checkpointing itself: the graph has no other choice to compute
            ({"checkpointing": p.spec}, p, analysis)
            for p in checkpointing_choices(target)
            if p.spec != config.checkpointing and not config.compile
        ]
        if config.sharding.gpus > 1 and not config.zero and config.fsdp == "no" and not config.pipeline_parallel.active:
            for change in SHARDING_CHANGES:
                variants.append((change, plan, analysis.with_config(dataclasses.replace(config, **change))))
    if not config.expandable_segments and config.checkpointing != "all":
        plan = parse_checkpointing(config.checkpointing)
        variants.append((ALLOCATOR_CHANGE, plan, analysis.with_config(dataclasses.replace(config, **ALLOCATOR_CHANGE))))
    computed = []
    for change, plan, each in variants:
        try:
            other = each.run(plan).memory
        except (ConfigError, UnsupportedError):  # e.g. no blocks to checkpoint in this model: not a choice here
            continue
        saved = memory.device_bytes - other.device_bytes
        if saved > 0:
            computed.append(
                Advice(changes=change, device_bytes=other.device_bytes, saved_bytes=saved, fits=each.fits(other), traced=False)
            )
    return sorted(computed, key=lambda advice: (advice.device_bytes, *(f"{k} {v}" for k, v in advice.changes.items())))
