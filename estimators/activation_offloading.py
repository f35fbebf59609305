"""torchtune's activation offloading (``torchtune.training.OffloadActivations``) applied to a what-if's saved tensors.

torchtune 0.6.1's recipes run the model's forward under ``OffloadActivations(use_streams=True)``, a
``saved_tensors_hooks`` context, with the output head under a ``NoOpManager`` (``get_act_offloading_ctx_manager``)
and the loss outside the context. Its hooks see every tensor autograd saves outside a checkpointed block, and,
under non-reentrant checkpointing, each block's positional inputs (the checkpoint saves them as saved tensors
outside its own hooks: ``_CheckpointFrame.save_inputs`` in torch 2.13). What this module models of it, per saved
tensor the hooks see:

- each ``pack`` call takes the next tensor id; a tensor of at least ``MIN_OFFLOAD_BYTES`` that is no parameter or
  buffer is copied to pinned host memory on a side stream, and autograd holds only its id;
- the device copy is kept in the forward stash until a later offloaded tensor's id is ``FORWARD_STASH`` past its
  own (that pack waits on its copy's event and drops it), or until the first backward node runs;
- a storage saved again (torchtune's ``dupe_cache``) is offloaded once and brought back once;
- backward's ``unpack`` copies it back to a new device tensor, kept in the backward stash until the next autograd
  node that unpacks an offloaded tensor has run (its hook drops the previous node's), or until backward ends.

Not modelled: the side stream's timing (a copy is assumed done when its event is waited on), and the
``record_stream`` path for an unpacked tensor a view outlives (its free then follows the compute stream, later).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .timeline import Position

__all__ = ["FORWARD_STASH", "MIN_OFFLOAD_BYTES", "Offloaded", "SavedThroughHooks", "offload_activations"]

MIN_OFFLOAD_BYTES = 1024
"""``OffloadActivations(min_offload_size=1024)``, the default torchtune's recipes take: smaller tensors stay."""

FORWARD_STASH = 5
"""``OffloadActivations(max_fwd_stash_size=5)``, the default: offloaded tensors whose device copy the forward
keeps alive until their host copy is known to be done."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedThroughHooks:
    """One tensor the saved-tensor hooks pack: when, how big, and when backward reads it and lets it go."""

    sid: int
    nbytes: int
    pack: int
    """Clock at which it was saved."""
    unpack: int | None
    """Clock at which backward read it back (``None``: never)."""
    release: Position | None
    """When autograd (or the checkpoint holding it) lets go of it (``None``: never)."""
    node: tuple[object, ...]
    """The backward node that unpacks it: backward's stash is dropped node by node."""
    node_done: Position | None
    """When that node has run (its hook fires)."""
    offloadable: bool
    """An activation on the device outside the head and the loss: not a weight, buffer or input."""


@dataclass(frozen=True, slots=True)
class Offloaded:
    """What offloading changes: how long each offloaded storage's device copy is held (moments that replace
    the saves'), the copies backward brings back (storage, from, to), and the bytes copied to the host."""

    held: dict[int, Position | None]
    fetched: list[tuple[int, Position, Position | None]]
    moved_bytes: int


def offload_activations(
    saves: list[SavedThroughHooks], *, at: Callable[[int | None], Position | None], backward_end: Position | None
) -> Offloaded:
    """Offload ``saves`` (one step's, in any order) as ``OffloadActivations`` does; ``at`` places a moment
    right after a clock; ``backward_end`` is when autograd's final callback drops what backward still stashes."""
    ordered = sorted(saves, key=lambda save: save.pack)
    first_unpack = min((save.unpack for save in ordered if save.unpack is not None), default=None)
    stash_end = at(first_unpack) if first_unpack is not None else backward_end
    held: dict[int, Position | None] = {}
    offloaded: dict[int, list[SavedThroughHooks]] = {}
    stash: list[tuple[int, int]] = []  # (tensor id, storage) of device copies the forward still keeps
    for tensor_id, save in enumerate(ordered):
        if not (save.offloadable and save.nbytes >= MIN_OFFLOAD_BYTES):
            continue
        if save.sid in offloaded:  # the dupe cache: one host copy for every save of the storage
            offloaded[save.sid].append(save)
            continue
        while stash and stash[0][0] <= tensor_id - FORWARD_STASH:
            held[stash.pop(0)[1]] = at(save.pack)
        offloaded[save.sid] = [save]
        stash.append((tensor_id, save.sid))
    for _, sid in stash:
        held[sid] = stash_end
    fetched = _fetched(offloaded, at, backward_end)
    moved = sum(group[0].nbytes for group in offloaded.values())
    return Offloaded(held=held, fetched=fetched, moved_bytes=moved)


def _fetched(
    offloaded: dict[int, list[SavedThroughHooks]],
    at: Callable[[int | None], Position | None],
    backward_end: Position | None,
) -> list[tuple[int, Position, Position | None]]:
    """Backward's copies: each offloaded storage brought back at its first unpack and held until autograd lets go
    of its last save, and until the next node that unpacks an offloaded tensor has run (or backward ends)."""
    unpacked = sorted(
        (min(s.unpack for s in group if s.unpack is not None), sid)
        for sid, group in offloaded.items()
        if any(s.unpack is not None for s in group)
    )
    nodes: list[tuple[object, ...]] = []
    done: dict[tuple[object, ...], Position | None] = {}
    for _, sid in unpacked:
        for save in offloaded[sid]:
            if save.node not in done:
                nodes.append(save.node)
                done[save.node] = save.node_done
    fetched = []
    for clock, sid in unpacked:
        group = offloaded[sid]
        releases = [save.release for save in group]
        position = nodes.index(group[0].node)
        stashed_until = done[nodes[position + 1]] if position + 1 < len(nodes) else backward_end
        moments = [*releases, stashed_until]
        free = None if any(m is None for m in moments) else max(moments)  # type: ignore[type-var]
        start = at(clock)
        assert start is not None
        fetched.append((sid, start, free))
    return fetched
