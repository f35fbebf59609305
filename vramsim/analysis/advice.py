"""Advice from the one trace: the other checkpointing choices and, over several GPUs, sharding the state."""

from __future__ import annotations

import dataclasses

from vramsim.analysis.device_memory import DeviceMemory
from vramsim.analysis.whatifs import Analysis, checkpointing_choices
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.checkpointing import CheckpointPlan, parse_checkpointing
from vramsim.workload.targets import Target

__all__ = ["graph_advice"]


def graph_advice(analysis: Analysis, config: SimulationConfig, target: Target, memory: DeviceMemory) -> list[str]:
    """What to change first, each computed from this trace's graph with what it saves on this run: the other
    checkpointing choices (training) and, over several GPUs, sharding the training state; nothing already set,
    nothing the target refuses (``_choices``), nothing that saves nothing. Changes that alter the traced
    program (weight dtype, optimizer, sizes) need another trace: ``vramsim/search/advice.py``, ``vramsim/search/fitting.py``."""
    from vramsim.views.terminal import format_bytes  # the report's figures, as the terminal prints them

    variants: list[tuple[str, CheckpointPlan, Analysis]] = []
    if config.task == "train" and config.checkpointing != "all":
        plan = parse_checkpointing(config.checkpointing)
        variants += [
            (f"--checkpointing {p.spec}", p, analysis) for p in checkpointing_choices(target) if p.spec != config.checkpointing
        ]
        if config.sharding.gpus > 1 and not config.zero and config.fsdp == "no" and not config.pipeline.active:
            for flag, change in (
                ("--zero 1", {"zero": 1}),
                ("--zero 2", {"zero": 2}),
                ("--zero 3", {"zero": 3}),
                ("--fsdp full", {"fsdp": "full"}),
            ):
                sharded = dataclasses.replace(config, **change)
                variants.append((flag, plan, analysis.with_config(sharded)))
    computed = []
    for flag, plan, each in variants:
        try:
            other = each.run(plan).memory
        except (ConfigError, UnsupportedError):  # e.g. no blocks to checkpoint in this model: not a choice here
            continue
        saved = memory.device_bytes - other.device_bytes
        if saved > 0:
            fits = " (fits)" if each.fits(other) else ""
            computed.append(
                (other.device_bytes, f"{flag}: {format_bytes(other.device_bytes)} on the device (-{format_bytes(saved)}){fits}")
            )
    return [line for _, line in sorted(computed)]
