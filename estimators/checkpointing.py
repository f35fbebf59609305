"""Activation checkpointing as a what-if over the traced program's graph.

``what_if`` applies a ``CheckpointPlan`` (the choices and their parsing: ``checkpointing_plan.py``) to one trace
without checkpointing: the frees it moves, the recomputed and fetched blocks it adds, and what it costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from vramsim.tracer.graph import saved_edges, storage_nodes
from vramsim.tracer.records import UnitRecord

from .activation_offloading import SavedThroughHooks, offload_activations
from .checkpointing_plan import CheckpointPlan
from .timeline import Block, Position, Timeline, derive_timeline

__all__ = ["CheckpointCost", "WhatIf", "what_if"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointCost:
    """What a checkpointing choice costs per training step, besides memory."""

    recomputed_ops: int = 0
    """Ops backward runs again."""
    recomputed_flops: int = 0
    """Their floating-point operations (matmuls, convolutions, attention; elementwise ops count 0)."""
    offloaded_bytes: int = 0
    """Bytes copied to host memory in forward and back in backward (saved weights included under ``offload``;
    activations only under torchtune's activation offloading)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIf:
    """A checkpointing choice applied to the traced program."""

    plan: CheckpointPlan
    timeline: Timeline
    cost: CheckpointCost


@dataclass(slots=True, kw_only=True)
class _Hold:
    """One saved-for-backward edge of the trace: who saved which storage, and when autograd packs, unpacks and lets go."""

    sid: int
    op: int
    ops_before: int
    unit: int | None
    nbytes: int
    pack: int
    unpack: int | None
    release: int | None


class _Schedule:
    """Moved frees and added blocks, placed right after traced clocks in the order they are made."""

    def __init__(self, graph: nx.MultiDiGraph) -> None:
        self.graph = graph
        self.free_at: dict[int, Position | None] = {}
        self.category: dict[int, str] = {}
        self.added: list[Block] = []
        self._seq = 0
        self._first_added = graph.graph["storage_count"]

    def at(self, clock: int | None) -> Position | None:
        """Right after traced clock ``clock``, after whatever was placed there before; ``None`` stays ``None``."""
        if clock is None:
            return None
        self._seq += 1
        return (clock, 1, self._seq)

    def add(
        self,
        *,
        nbytes: int,
        module: str,
        op: str,
        step: int,
        phase: str,
        category: str,
        alloc_at: Position | None,
        copy_of: int | None = None,
    ) -> int:
        """A block the traced program did not make (a recompute, a fetch, a stashed RNG state); its key."""
        assert alloc_at is not None
        self.added.append(
            Block(
                nbytes=nbytes,
                category=category,
                module=module,
                phase=phase,
                op=op,
                step=step,
                alloc_at=alloc_at,
                free_at=None,
                copy_of=copy_of,
            )
        )
        return self._first_added + len(self.added) - 1

    def copy(self, sid: int, *, phase: str, category: str, at: Position | None, nbytes: int | None = None) -> int:
        """A new block made like traced storage ``sid`` (a recomputed or fetched activation)."""
        attrs = self.graph.nodes[("storage", sid)]
        return self.add(
            nbytes=attrs["nbytes"] if nbytes is None else nbytes,
            module=attrs["module"],
            op=attrs["op"],
            step=attrs["step"],
            phase=phase,
            category=category,
            alloc_at=at,
            copy_of=sid,
        )

    def free_added(self, key: int, at: Position | None) -> None:
        """When added block ``key`` is let go of; ``None`` for never."""
        self.added[key - self._first_added].free_at = at

    def program_free(self, sid: int) -> Position | None:
        """When the program itself let go of traced storage ``sid`` (autograd's saved copies aside)."""
        attrs = self.graph.nodes[("storage", sid)]
        return attrs["free_at"] if attrs["unreferenced"] is None else self.at(attrs["unreferenced"])

    def timeline(self) -> Timeline:
        """The traced timeline with the moved frees and added blocks in place."""
        return derive_timeline(self.graph, free_at=self.free_at, added=self.added, category=self.category)


def what_if(
    graph: nx.MultiDiGraph, plan: CheckpointPlan, *, rng_state_bytes: int = 0, activation_offloading: bool = False
) -> WhatIf:
    """The program as it would run under ``plan``, computed from one trace without checkpointing.

    ``rng_state_bytes``: the host RNG state a checkpoint stashes (``torch.get_rng_state()``), where
    host memory is the device's (the CPU target); 0 elsewhere. ``activation_offloading``: what the saved-tensor
    hooks see goes through torchtune's ``OffloadActivations`` (``activation_offloading.py``), on top of ``plan``.
    """
    holds = [
        _Hold(
            sid=sid,
            op=op,
            ops_before=a["ops_before"],
            unit=a["unit"],
            nbytes=a["nbytes"],
            pack=a["pack_clock"],
            unpack=a["unpack_clock"],
            release=a["release_clock"],
        )
        for sid, op, a in saved_edges(graph)
    ]
    schedule = _Schedule(graph)
    cost = CheckpointCost()
    if plan.kind == "offload":
        if activation_offloading:
            raise ValueError(
                "offload already moves every saved tensor to the host; activation offloading goes on top of none or a checkpoint"
            )
        cost = CheckpointCost(offloaded_bytes=_offload(schedule, holds))
    elif plan.kind == "auto":
        raise ValueError("'auto' is resolved to a first:F+selective:S plan before a what-if (budgeted_plan)")
    elif plan.kind != "none":
        if graph.graph["nested_units"]:
            raise NotImplementedError("checkpointed blocks nested in other checkpointed blocks are not modelled")
        units = {i: unit for i, unit in enumerate(graph.graph["units"]) if plan.checkpointed(unit.index)}
        if not units:
            raise ValueError("the traced program has no blocks to checkpoint (the model has no checkpointing call sites)")
        cost = _Checkpoints(schedule, holds, units, plan, rng_state_bytes, activation_offloading).apply()
    elif activation_offloading:
        cost = _Checkpoints(schedule, holds, {}, plan, rng_state_bytes, activation_offloading).apply()
    return WhatIf(plan=plan, timeline=schedule.timeline(), cost=cost)


def _latest(moments: list[Position | None]) -> Position | None:
    """The latest of the moments a storage is still held; ``None`` (never let go) wins."""
    if any(moment is None for moment in moments):
        return None
    return max(moments)  # type: ignore[type-var]


def _offload(schedule: _Schedule, holds: list[_Hold]) -> int:
    """``save_on_cpu``: what the forward saves goes to host memory; backward copies each saved
    tensor back to the device when it reads it, and drops the copy when autograd lets go."""
    nodes = schedule.graph.nodes
    kept: dict[int, list[Position | None]] = {}
    offloaded: set[int] = set()
    moved = 0
    last_step = max((nodes[("op", hold.op)]["step"] for hold in holds), default=0)
    for hold in holds:
        if nodes[("op", hold.op)]["phase"] != "forward":
            kept.setdefault(hold.sid, []).append(schedule.at(hold.release))
            continue
        offloaded.add(hold.sid)
        if nodes[("op", hold.op)]["step"] == last_step:  # one step's traffic, the steady-state one's
            moved += hold.nbytes
        if hold.unpack is not None:
            fetched = schedule.at(hold.unpack)
            key = schedule.copy(hold.sid, phase="backward", category="activations", at=fetched, nbytes=hold.nbytes)
            schedule.free_added(key, schedule.at(hold.release))
    for sid in offloaded:
        if nodes[("storage", sid)]["alloc_at"][0] == 0:
            continue  # weights, buffers and inputs stay where they are
        schedule.free_at[sid] = _latest([schedule.program_free(sid), *kept.get(sid, [])])
        schedule.category[sid] = "temporaries"
    return moved


_UNSAVED = frozenset({"temporaries", "outputs"})
"""Traced roles of a storage no op saved for backward. A checkpoint saves its unit's inputs itself
(``_NoopSaveInputs``'s ``ctx.save_for_backward`` in torch/utils/checkpoint.py), so one it holds is an
activation even where nothing of the traced program saved it: a bf16 residual stream that the next
RMSNorm upcasts before saving, or an embedding's output that needs no gradient."""


class _Checkpoints:
    """Non-reentrant ``torch.utils.checkpoint`` around each unit (torch/utils/checkpoint.py):

    - forward: autograd keeps nothing the unit saves; the checkpoint keeps the unit's inputs (and
      the host RNG state) until autograd lets go of the unit's last saved tensor (its frame dies);
    - backward: the first read of a saved tensor of the unit replays the unit's forward up to the
      op that saved its last tensor (early stop); replayed tensors that are saved live until
      autograd lets go of them, the others until the replay drops them or stops; the host RNG
      state ``torch.random.fork_rng`` stashes around the replay counts where host memory is the
      device's;
    - selective: outputs of the ops the plan saves (``CheckpointPlan.saves``) are kept from the forward and handed to the
      replay instead of being made again.
    """

    def __init__(
        self,
        schedule: _Schedule,
        holds: list[_Hold],
        units: dict[int, UnitRecord],
        plan: CheckpointPlan,
        rng_bytes: int,
        offloading: bool = False,
    ) -> None:
        self.schedule = schedule
        self.nodes = schedule.graph.nodes
        self.units = units
        self.plan = plan
        self.rng_bytes = rng_bytes
        self.offloading = offloading
        self.events = _events_by_clock(schedule.graph)
        self.unit_holds: dict[int, list[_Hold]] = {}
        self.outside: list[_Hold] = []
        """Saved tensors outside the units: held as the trace held them."""
        self.kept: dict[int, list[Position | None]] = {}
        """Moments storages are held by what stays as it was (saved tensors outside the units)."""
        self.extra: dict[int, list[Position | None]] = {}
        """Moments storages are held by the checkpoints (their inputs, selective's cache)."""
        self.hooked: list[SavedThroughHooks] = []
        """What the saved-tensor hooks see of the checkpoints: each unit's positional inputs."""
        self.input_moments: dict[int, list[Position | None]] = {}
        """The moments in ``extra`` that are a checkpoint holding its unit's inputs."""
        for hold in holds:
            if hold.unit in units:
                self.unit_holds.setdefault(hold.unit, []).append(hold)
            else:
                self.outside.append(hold)

    def apply(self) -> CheckpointCost:
        """Checkpoint every unit, offload what the hooks see where asked, then move each storage's free to the
        last moment something still holds it."""
        ops = flops = 0
        last_step = max((unit.step for unit in self.units.values()), default=0)
        for index, unit in self.units.items():
            unit_ops, unit_flops = self._unit(unit, self.unit_holds.get(index, []))
            if unit.step == last_step:  # the cost of one step: the steady-state one, as the memory figures
                ops += unit_ops
                flops += unit_flops
        held, moved = self._offloaded() if self.offloading else ({}, 0)
        for hold in self.outside:
            if not (hold.sid in held and self._forward(hold)):
                self.kept.setdefault(hold.sid, []).append(self.schedule.at(hold.release))
        for sid, moment in held.items():
            self.extra[sid] = [m for m in self.extra.get(sid, []) if m not in self.input_moments.get(sid, [])]
            self.kept.setdefault(sid, []).append(moment)
        unsaved = {hold.sid for holds in self.unit_holds.values() for hold in holds} | held.keys()
        for sid in unsaved | self.extra.keys():
            if self.nodes[("storage", sid)]["alloc_at"][0] == 0:
                continue  # weights, buffers and inputs stay where they are
            moments = [*self.kept.get(sid, []), *self.extra.get(sid, [])]
            self.schedule.free_at[sid] = _latest([self.schedule.program_free(sid), *moments])
            if not moments:
                self.schedule.category[sid] = "temporaries"
            elif sid in self.extra and self.nodes[("storage", sid)]["category"] in _UNSAVED:
                self.schedule.category[sid] = "activations"  # saved by the checkpoint, if by no op of the trace
        return CheckpointCost(recomputed_ops=ops, recomputed_flops=flops, offloaded_bytes=moved)

    def _forward(self, hold: _Hold) -> bool:
        return bool(self.nodes[("op", hold.op)]["phase"] == "forward")

    def _offloaded(self) -> tuple[dict[int, Position | None], int]:
        """torchtune's ``OffloadActivations`` over each step's saves the hooks see (the saved tensors outside the
        units and the units' positional inputs), the head's and the loss's aside (``NoOpManager``, and the loss
        outside the context): each offloaded storage's device hold, the copies backward brings back (added
        here), and the steady-state step's bytes copied to the host."""
        schedule = self.schedule
        head = schedule.graph.graph.get("head_module")
        saves = list(self.hooked)
        for hold in self.outside:
            if not self._forward(hold):
                continue
            module = self.nodes[("op", hold.op)]["module"]
            outside_model = module == "" or (head is not None and (module == head or module.startswith(f"{head}.")))
            release = schedule.at(hold.release)
            saves.append(
                SavedThroughHooks(
                    sid=hold.sid,
                    nbytes=hold.nbytes,
                    pack=hold.pack,
                    unpack=hold.unpack,
                    release=release,
                    node=("op", hold.op),
                    node_done=release,
                    offloadable=not outside_model and self._activation(hold.sid),
                )
            )
        held: dict[int, Position | None] = {}
        moved = 0
        steps: dict[int, list[SavedThroughHooks]] = {}
        for save in saves:
            steps.setdefault(self.nodes[("storage", save.sid)]["step"], []).append(save)
        for _, step_saves in sorted(steps.items()):
            releases = [s.release for s in step_saves]
            end = None if None in releases else max(releases)  # type: ignore[type-var]
            outcome = offload_activations(step_saves, at=schedule.at, backward_end=end)
            held.update(outcome.held)
            for sid, start, free in outcome.fetched:
                key = schedule.copy(sid, phase="backward", category="activations", at=start)
                schedule.free_added(key, free)
            moved = outcome.moved_bytes  # the last step's: the steady state
        return held, moved

    def _activation(self, sid: int) -> bool:
        """Made by the program (not a weight, buffer or input, which the hooks' parameter check or vramsim's
        timeline keeps where they are)."""
        return bool(self.nodes[("storage", sid)]["alloc_at"][0] != 0)

    def _hold_extra(self, sid: int, at: Position | None) -> None:
        """Record that a checkpoint holds traced storage ``sid`` until ``at``."""
        self.extra.setdefault(sid, []).append(at)

    def _unit(self, unit: UnitRecord, holds: list[_Hold]) -> tuple[int, int]:
        """Checkpoint one unit: hold its inputs (and RNG state), replay it in backward; its recomputed ops and FLOPs."""
        schedule = self.schedule
        releases = [hold.release for hold in holds]
        death = None if None in releases else schedule.at(max([unit.last_clock, *releases]))  # type: ignore[type-var]
        if self.rng_bytes:  # the host RNG state, stashed for the replay
            key = schedule.add(
                nbytes=self.rng_bytes,
                module=unit.module,
                op="aten.empty",
                step=unit.step,
                phase="forward",
                category="activations",
                alloc_at=schedule.at(unit.first_clock),
            )
            schedule.free_added(key, death)
        for sid in unit.inputs:
            self._hold_extra(sid, death)
            self.input_moments.setdefault(sid, []).append(death)
        cached = self._cached_outputs(unit, self.plan) if self.plan.selective_at(unit.index) else {}
        unpacks = [hold.unpack for hold in holds if hold.unpack is not None]
        stop = max(holds, key=lambda hold: hold.pack) if unpacks else None
        for sid, op in cached.items():
            if stop is None or op >= stop.ops_before:
                self._hold_extra(sid, death)  # cached, never handed to a replay
        if self.offloading:
            self._hook_inputs(unit, holds, death)
        if stop is None:
            return 0, 0
        saved: dict[int, list[int | None]] = {}
        for hold in holds:
            saved.setdefault(hold.sid, []).append(hold.release)
        self._replay(unit, stop.pack, min(unpacks), saved, cached)
        ops = [op for op in range(unit.first_op, stop.ops_before) if op not in cached.values()]
        return len(ops), sum(self.nodes[("op", op)]["flops"] for op in ops)

    def _hook_inputs(self, unit: UnitRecord, holds: list[_Hold], death: Position | None) -> None:
        """The unit's positional inputs as the hooks see them: packed as the unit begins, unpacked when backward
        first reads a tensor of the unit (the replay's trigger), by that tensor's node."""
        unpacked = [hold for hold in holds if hold.unpack is not None]
        trigger = min(unpacked, key=lambda hold: hold.unpack or 0) if unpacked else None
        for sid in unit.saved_inputs:
            self.hooked.append(
                SavedThroughHooks(
                    sid=sid,
                    nbytes=self.nodes[("storage", sid)]["nbytes"],
                    pack=unit.first_clock,
                    unpack=None if trigger is None else trigger.unpack,
                    release=death,
                    node=("op", trigger.op) if trigger is not None else ("unit", unit.first_clock),
                    node_done=None if trigger is None else self.schedule.at(trigger.release),
                    offloadable=self._activation(sid),
                )
            )

    def _cached_outputs(self, unit: UnitRecord, plan: CheckpointPlan) -> dict[int, int]:
        """Storages the unit's saved ops (``plan.saves``) allocated -> the op."""
        graph = self.schedule.graph
        cached: dict[int, int] = {}
        matmuls = 0
        for op in range(unit.first_op, unit.last_op + 1):
            node = ("op", op)
            name = self.nodes[node]["name"]
            matmuls += name == "aten.mm"
            if plan.saves(name, matmuls):
                for _, (_, sid), key in graph.out_edges(node, keys=True):
                    if key == "produced":
                        cached[sid] = op
        return cached

    def _replay(
        self, unit: UnitRecord, stop_clock: int, trigger: int, saved: dict[int, list[int | None]], cached: dict[int, int]
    ) -> None:
        """Replay the unit's forward events ``(first_clock, stop_clock]`` right after clock ``trigger``."""
        schedule = self.schedule
        rng_key = None
        if self.rng_bytes:  # torch.random.fork_rng stashes the host state around the replay
            rng_key = schedule.add(
                nbytes=self.rng_bytes,
                module=unit.module,
                op="aten.empty",
                step=unit.step,
                phase="recompute",
                category="temporaries",
                alloc_at=schedule.at(trigger),
            )
        made: dict[int, int] = {}
        for clock in range(unit.first_clock + 1, stop_clock + 1):
            sid, is_alloc = self.events[clock - 1]
            if self.nodes[("storage", sid)]["alloc_at"][0] <= unit.first_clock:
                continue  # made before the unit: the checkpoint hands its inputs back
            if is_alloc:
                made[sid] = (
                    sid
                    if sid in cached
                    else schedule.copy(
                        sid, phase="recompute", category="activations" if sid in saved else "temporaries", at=schedule.at(trigger)
                    )
                )
            elif sid in made and sid not in saved:
                self._drop(made.pop(sid), sid, schedule.at(trigger), cached)
        for sid, key in made.items():
            if sid in saved:
                releases = saved[sid]
                at = None if None in releases else schedule.at(max([trigger, *releases]))  # type: ignore[type-var]
            else:
                at = schedule.at(trigger)  # the replay stops: its frames unwind
            self._drop(key, sid, at, cached)
        if rng_key is not None:
            schedule.free_added(rng_key, schedule.at(trigger))

    def _drop(self, key: int, sid: int, at: Position | None, cached: dict[int, int]) -> None:
        """Let go of a replayed block at ``at``; a cached output is held by the checkpoint instead."""
        if sid in cached:
            self._hold_extra(sid, at)
        else:
            self.schedule.free_added(key, at)


def _events_by_clock(graph: nx.MultiDiGraph) -> list[tuple[int, bool]]:
    """The traced events by clock (index ``c - 1`` is the event of clock ``c``)."""
    events: list[tuple[int, bool] | None] = [None] * graph.graph["last_clock"]
    for sid, attrs in storage_nodes(graph):
        alloc, free = attrs["alloc_at"], attrs["free_at"]
        if alloc[0]:
            events[alloc[0] - 1] = (sid, True)
        if free is not None:
            events[free[0] - 1] = (sid, False)
    assert all(e is not None for e in events), "every traced clock has one event"
    return events  # type: ignore[return-value]
