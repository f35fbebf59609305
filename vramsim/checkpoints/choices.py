"""What ``checkpoint`` saves and restores, decided from the config alone (no torch), so the command line answers a
bad choice at once, before anything is traced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError

__all__ = ["MAP_LOCATIONS", "SAVE_FORMATS", "CheckpointChoice", "Layout", "MapLocation", "checkpoint_choice"]

MAP_LOCATIONS = ("cpu", "device")
SAVE_FORMATS = ("trainer", "torch", "dcp", "deepspeed")

MapLocation = Literal["cpu", "device"]
Layout = Literal["trainer", "torch"]


@dataclass(frozen=True, slots=True)
class CheckpointChoice:
    """The save format asked for or implied, and, for the unsharded ones, their file layout and map location."""

    save_format: str
    layout: Layout
    location: MapLocation


def checkpoint_choice(
    config: SimulationConfig, save_format: str | None, map_location: str | None, async_save: bool
) -> CheckpointChoice:
    """The checkpoint of a training run of ``config``: a ConfigError for a choice it cannot take."""
    _check(config)
    given = _save_format(save_format, config, async_save)
    if given in ("dcp", "deepspeed") and map_location is not None:
        raise ConfigError(
            f"map_location is the Trainer's and torch.load's choice; save_format={given!r} loads on the host itself"
        )
    layout: Layout = "trainer" if given == "trainer" else "torch"
    return CheckpointChoice(save_format=given, layout=layout, location=_map_location(map_location, config, layout))


def _save_format(given: str | None, config: SimulationConfig, async_save: bool) -> str:
    """The format asked for, or the one the sharding implies; each sharding saves its own way."""
    sharded = "deepspeed" if config.zero else "dcp" if config.fsdp != "no" else None
    chosen = given or sharded or "trainer"
    if chosen not in SAVE_FORMATS:
        raise ConfigError(f"unknown save format {chosen!r}; choose one of: {', '.join(SAVE_FORMATS)}")
    if chosen == "deepspeed" and not config.zero:
        raise ConfigError("save_format='deepspeed' is DeepSpeed's ZeRO checkpoint; set zero (1, 2 or 3)")
    if sharded is not None and chosen != sharded:
        raise UnsupportedError(
            f"save_format={chosen!r} with {'zero' if config.zero else 'fsdp'}: modelled is "
            f"save_format={sharded!r} (how that sharding saves each rank's state)"
        )
    if async_save and chosen != "dcp":
        raise ConfigError("async_save is dcp.async_save; use save_format='dcp'")
    return chosen


def _map_location(given: str | None, config: SimulationConfig, layout: Layout) -> MapLocation:
    if given is None:
        return "device" if config.gpus > 1 or layout == "torch" else "cpu"
    if given not in MAP_LOCATIONS:
        raise ConfigError(f"unknown map location {given!r}; choose one of: {', '.join(MAP_LOCATIONS)}")
    return "cpu" if given == "cpu" else "device"


def _check(config: SimulationConfig) -> None:
    """A training run's checkpoint, of data-parallel ranks (model-parallel ranks' files are not modelled)."""
    if config.task != "train":
        raise ConfigError(f"a training checkpoint holds optimizer state; task={config.task!r} has none (use task='train')")
    if config.optimizer is None:
        raise ConfigError("optimizer=None leaves no optimizer state to checkpoint; name an optimizer")
    if config.checkpointing == "all":
        raise ConfigError("checkpointing='all' compares choices; a checkpoint is of one run (choose one)")
    if config.tp > 1 or config.pp > 1 or config.cp > 1 or config.ep > 1:
        raise UnsupportedError(
            "checkpoints of tensor, pipeline, context or expert parallel ranks are not modelled yet; "
            "data parallelism is (DDP, ZeRO through DeepSpeed's files, FSDP2 through DCP)"
        )
