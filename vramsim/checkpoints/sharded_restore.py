"""One rank's device timeline while a sharded checkpoint (DCP or DeepSpeed ZeRO) is saved and restored.

Both start from what the rank holds between steps on its traced (sharded) timeline: its weights or their
shards, buffers, optimizer states and the buffers its framework keeps for the run (DeepSpeed's reduce bucket,
ZeRO-3's gradient partitions, DDP's buckets); the batch is left out.

- Saving adds nothing on the device: DCP's writer copies each tensor to the host (``filesystem.py``
  ``_OverlappingCpuLoader``; ``async_save`` stages the whole state dict in host memory) and ``torch.save``
  copies one storage at a time.
- DCP restore into a fresh model and optimizer (torch's ``state_dict.py``): ``get_state_dict`` first runs
  ``_init_optim_state``, a step with ``param.grad = torch.zeros_like(param)`` for every trainable parameter
  (lr 0), which makes the optimizer's states; that step is the traced first step's optimizer phase, replayed
  here with the last step's gradients standing for the zeros; ``zero_grad`` frees them; ``dcp.load`` then reads
  each tensor into the host (``torch.load(map_location="cpu")``) and copies it into the existing shard, so on a
  GPU nothing more is allocated; on the cpu target each loaded tensor is device memory, and it lives until the
  next one is loaded (``read_data`` rebinds it).
- DeepSpeed restore (``load_checkpoint``): a fresh engine has no optimizer states (ZeRO makes them in the first
  step), the files are loaded on the host and the inner optimizer's ``load_state_dict`` makes the states on the
  device: the rank ends where it started, with its held state.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramsim.checkpoints.restore import Clock
from vramsim.estimators.timeline import Block, Position, Timeline, order_blocks
from vramsim.tracer.categories import Category

__all__ = ["ShardedTimelines", "sharded_timelines"]

_HELD = frozenset({"parameters", "buffers", "optimizer_states", "communication", "gradients"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardedTimelines:
    save: Timeline
    restore: Timeline


def sharded_timelines(timeline: Timeline, *, dcp: bool, loaded: list[int], zeros: list[int] | None = None) -> ShardedTimelines:
    """``timeline``: the rank's; ``dcp``: restore through DCP (else DeepSpeed); ``loaded``: on the cpu target,
    the tensors ``dcp.load`` reads, in order (empty on a GPU, where they land on the host); ``zeros``: the bytes of
    each ``zeros_like`` gradient ``_init_optim_state`` makes, where the rank's gradients are not its own storages
    (DDP's ``gradient_as_bucket_view``); else the last step's gradients stand for them."""
    held = [b for b in timeline.blocks if b.free_at is None and b.category in _HELD and b.op != "all_gather"]
    clock = Clock()
    save = order_blocks([_at(b, clock.tick(), None) for b in held], [(1, max(clock.now, 1))])
    if not dcp:
        return ShardedTimelines(save=save, restore=save)
    clock = Clock()
    blocks = [_at(b, clock.tick(), None) for b in held if b.category != Category.OPTIMIZER_STATE.value]
    zeros_at = clock.tick()
    grads = _last_gradients(timeline) if zeros is None else [_sized(nbytes) for nbytes in zeros]
    made: dict[int, Block] = {}
    first, last = timeline.steps[0]
    for key, is_alloc in timeline.events[first : last + 1]:
        block = timeline.blocks[key]
        if block.phase != "optimizer" or block.step != 0 or block.category == Category.GRADIENT.value:
            continue
        if is_alloc:
            made[key] = _at(block, clock.tick(), None)
        elif key in made:
            made[key].free_at = clock.tick()
    zero_grad = clock.tick()
    blocks += [_at(b, zeros_at, zero_grad) for b in grads] + list(made.values())
    previous: Block | None = None
    for nbytes in loaded:  # each loaded tensor is freed when the next one is loaded
        current = Block(
            nbytes=nbytes,
            category="checkpoint_loaded",
            module="",
            phase="restore",
            op="dcp.load",
            step=0,
            alloc_at=clock.tick(),
            free_at=None,
        )
        if previous is not None:
            previous.free_at = clock.tick()
        blocks.append(current)
        previous = current
    if previous is not None:
        previous.free_at = clock.tick()
    return ShardedTimelines(save=save, restore=order_blocks(blocks, [(1, clock.now)]))


def _last_gradients(timeline: Timeline) -> list[Block]:
    """The gradients of the last step (``zeros_like`` of each trainable parameter or shard is as large)."""
    last = len(timeline.steps) - 1
    return [b for b in timeline.blocks if b.category == Category.GRADIENT.value and b.step == last and b.phase == "backward"]


def _sized(nbytes: int) -> Block:
    return Block(
        nbytes=nbytes,
        category=Category.GRADIENT.value,
        module="",
        phase="restore",
        op="aten.zeros_like",
        step=0,
        alloc_at=(0, 0, 0),
        free_at=None,
    )


def _at(block: Block, alloc_at: Position, free_at: Position | None) -> Block:
    return Block(
        nbytes=block.nbytes,
        category=block.category,
        module=block.module,
        phase="restore",
        op=block.op,
        step=0,
        alloc_at=alloc_at,
        free_at=free_at,
    )
