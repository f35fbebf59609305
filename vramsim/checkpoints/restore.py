"""The device's timeline while a checkpoint is saved and while it is restored, from the traced state.

Resuming as the Hugging Face Trainer does (``_load_from_checkpoint``, ``_load_optimizer_and_scheduler``):
the model is built, its weights file is loaded on the host (``safetensors.torch.load_file(device="cpu")``)
and copied into the parameters in place; then ``torch.load(optimizer.pt, map_location=...)`` makes every
saved state tensor at the map location, and ``optimizer.load_state_dict`` gives each parameter its state
through torch's own ``Optimizer._process_value_according_to_param_policy``, called here on the traced
parameters: a state tensor already of the parameter's device and dtype is kept, any other is copied (cast
to the parameter's dtype), and the loaded dictionary is freed when the call returns.

The plain loop's one file (``layout="torch"``) is restored as ``ckpt = torch.load(path, map_location)``,
``model.load_state_dict(ckpt["model"])``, ``optimizer.load_state_dict(ckpt["optimizer"])``: the weights are
loaded at the map location too, beside the optimizer state, and live until ``ckpt`` is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vramsim.checkpoints.choices import Layout, MapLocation
from vramsim.errors import UnsupportedError
from vramsim.estimators.timeline import Block, Position, Timeline, order_blocks
from vramsim.tracer.categories import Category
from vramsim.workload.optimizers import describe_optimizer
from vramsim.workload.program import Program

__all__ = ["LOADED", "Clock", "RestoreTimelines", "restore_timelines"]

LOADED = "checkpoint_loaded"
"""Breakdown key of what ``torch.load`` / ``load_file`` made and ``load_state_dict`` has not yet consumed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreTimelines:
    """The save and the restore as device timelines, and what each holds on the host."""

    save: Timeline
    restore: Timeline
    restore_host_bytes: int
    """The most the restore holds on the host at once: a weights file, or the loaded optimizer state."""


@dataclass(slots=True)
class Clock:
    """Hands out positions in order: one clock per event group."""

    now: int = 0

    def tick(self) -> Position:
        self.now += 1
        return (self.now, 0, 0)


def restore_timelines(
    program: Program, *, layout: Layout, map_location: MapLocation, host_is_device: bool, shards: list[list[int]]
) -> RestoreTimelines:
    """``shards``: the weights' tensor sizes, by file; the host is the device on the cpu target."""
    optimizer = program.optimizer
    assert optimizer is not None, "a checkpoint is taken of a training program"
    if type(optimizer).load_state_dict is not torch.optim.Optimizer.load_state_dict:
        raise UnsupportedError(
            f"restoring {describe_optimizer(optimizer)} (its own load_state_dict) is not modelled yet; torch.optim optimizers are"
        )
    model_blocks = _model_blocks(program.model, host_is_device)
    state = _state_blocks(optimizer, host_is_device)
    clock = Clock()
    save = order_blocks([_at(block, clock.tick(), None) for block in [*model_blocks, *state]], [(1, clock.now)])
    clock = Clock()
    blocks = [_at(block, (0, 0, 0), None) for block in model_blocks]
    on_device = host_is_device or map_location == "device"
    # Each weights file loaded, copied into the parameters, dropped: on the host (load_file(device="cpu")), but
    # peft's load_adapter loads adapter files on the device (load_peft_weights(device=infer_device())).
    if layout == "trainer" and (host_is_device or _is_peft(program.model)):
        for sizes in shards:
            loaded, freed = clock.tick(), clock.tick()
            blocks += [_block(size, LOADED, "safetensors.load_file", loaded, freed) for size in sizes]
    alongside = [size for sizes in shards for size in sizes] if layout == "torch" else []
    blocks += _optimizer_load(optimizer, clock, on_device=on_device, alongside=alongside)
    restore = order_blocks(blocks, [(1, max(clock.now, 1))])
    optimizer_bytes = sum(b.nbytes for b in _state_blocks(optimizer, True))
    if layout == "torch":
        host = 0 if on_device else optimizer_bytes + sum(alongside)
    else:
        host = max([0 if on_device else optimizer_bytes, *map(sum, shards)])
    return RestoreTimelines(save=save, restore=restore, restore_host_bytes=host)


def _optimizer_load(optimizer: torch.optim.Optimizer, clock: Clock, *, on_device: bool, alongside: list[int]) -> list[Block]:
    """``optimizer.load_state_dict(torch.load(..., map_location))``: the loaded tensors (counted when
    ``on_device``: mapped to the device, or the host is the device), then each parameter's state as torch's
    policy makes it from them. ``alongside``: other tensors of the same file (weights copied into the
    parameters), freed with the loaded state."""
    saved = optimizer.state_dict()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    ids = [i for group in saved["param_groups"] for i in group["params"]]
    by_id = dict(zip(ids, params, strict=True))
    loaded_at = clock.tick()
    made: list[tuple[int, int, Position]] = []
    """(loaded bytes, bytes of the copy the policy made, when)"""
    kept: list[int] = []
    for param_id, values in saved["state"].items():
        param = by_id[param_id]
        for key, value in values.items():
            if not isinstance(value, torch.Tensor):
                continue
            proxy = torch.empty_like(value, device="meta") if on_device else torch.empty(0, dtype=value.dtype)
            result = torch.optim.Optimizer._process_value_according_to_param_policy(
                param, proxy, param_id, saved["param_groups"], key
            )
            size = value.numel() * value.element_size()
            if result is proxy:
                kept.append(size)
            elif result.device.type == "meta":  # a copy on the parameter's device
                made.append((size, value.numel() * result.element_size(), clock.tick()))
    freed = clock.tick()
    loaded = kept + [size for size, _, _ in made] + alongside
    blocks = [_block(size, LOADED, "torch.load", loaded_at, freed) for size in loaded] if on_device else []
    if on_device:  # what the policy kept stays as the parameter's state: not freed
        for block in blocks[: len(kept)]:
            block.category, block.free_at = Category.OPTIMIZER_STATE.value, None
    blocks += [_block(size, Category.OPTIMIZER_STATE.value, "Optimizer.load_state_dict", at, None) for _, size, at in made]
    return blocks


def _is_peft(model: torch.nn.Module) -> bool:
    try:
        import peft
    except ImportError:
        return False
    return isinstance(model, peft.PeftModel)


def _model_blocks(model: torch.nn.Module, host_is_device: bool) -> list[Block]:
    """One block per storage of the parameters and buffers on the device (tied weights once)."""
    seen: set[int] = set()
    blocks = []
    for category, tensors in ((Category.PARAMETER, model.parameters()), (Category.BUFFER, model.buffers())):
        for tensor in tensors:
            if id(tensor) in seen or not _on_device(tensor, host_is_device):
                continue
            seen.add(id(tensor))
            blocks.append(_block(tensor.untyped_storage().nbytes(), category.value, "", (0, 0, 0), None))
    return blocks


def _state_blocks(optimizer: torch.optim.Optimizer, host_is_device: bool) -> list[Block]:
    return [
        _block(t.untyped_storage().nbytes(), Category.OPTIMIZER_STATE.value, "", (0, 0, 0), None)
        for state in optimizer.state.values()
        for t in state.values()
        if isinstance(t, torch.Tensor) and _on_device(t, host_is_device)
    ]


def _on_device(tensor: torch.Tensor, host_is_device: bool) -> bool:
    """Meta stands for the target; host tensors (Adam's step counters off a GPU) count where the host is it."""
    return tensor.device.type == "meta" or host_is_device


def _block(nbytes: int, category: str, op: str, alloc_at: Position, free_at: Position | None) -> Block:
    return Block(nbytes=nbytes, category=category, module="", phase="restore", op=op, step=0, alloc_at=alloc_at, free_at=free_at)


def _at(block: Block, alloc_at: Position, free_at: Position | None) -> Block:
    return _block(block.nbytes, block.category, block.op, alloc_at, free_at)
