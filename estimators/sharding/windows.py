"""When one rank gathers, reshards and reduces each block's weights and gradients, step by step.

``states.py`` shrinks the model states to the rank's share; ``StepWindows`` places what ZeRO-3
and FSDP2 add around each block (a decoder layer, a UNet block: the graph's ``units``) and the
root: whole weights, all-gather outputs, reduce-scatter inputs, the gradients' hand-over.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from vramsim.tracer.graph import saved_edges
from vramsim.tracer.records import UnitRecord

from ..expert_parallel import EXPERTS_MODULE, expert_weight
from ..timeline import Block, Position
from .buckets import reduce_buckets
from .micro_steps import MicroStep
from .rank import COMMUNICATION, Rank, Weight

__all__ = ["StepWindows", "block_groups", "training_windows"]


def training_windows(rank: Rank) -> None:
    """Each step's gathers (ZeRO-3, FSDP2), gradient reduces and DeepSpeed's reduce bucket, on ``rank``."""
    units = rank.graph.graph["units"]
    unpacks: dict[int, list[int]] = defaultdict(list)
    for _, _, hold in saved_edges(rank.graph):
        if hold["unit"] is not None and hold["unpack_clock"] is not None:
            unpacks[hold["unit"]].append(hold["unpack_clock"])
    experts = _expert_calls(rank) if rank.plan.fsdp != "no" and rank.plan.expert_parallel > 1 else {}
    modules = [unit.module for unit in units] + sorted({module for module, _ in experts})
    groups = block_groups(modules, rank.weights.values())
    for step in range(len(rank.graph.graph["step_clocks"])):
        grads = rank.grads.get(step, [])
        steps = rank.micro_steps.get(step, [])
        if not grads or not steps:
            continue
        for position, micro in enumerate(steps):
            following = steps[position + 1].first_clock if position + 1 < len(steps) else rank.graph.graph["last_clock"] + 1
            calls = [
                (i, unit)
                for i, unit in enumerate(units)
                if unit.step == step and micro.first_clock <= unit.first_clock < following
            ]
            window = StepWindows(
                rank,
                step,
                micro,
                calls,
                unpacks,
                groups,
                experts={module: clocks for (module, each), clocks in experts.items() if each == step},
            )
            if rank.plan.shards_parameters:  # first: a block reshards before its reduce-scatter input is made
                window.gathers()
            if position == _reducing_micro_step(rank, len(steps)):
                window.gradients()
            if rank.plan.zero == 2 or position + 1 == len(steps):
                reduce_buckets(rank, step, grads, list(window.grad_clock.values()))


def _reducing_micro_step(rank: Rank, count: int) -> int:
    """The micro-step whose backward ends the traced gradients' whole copies. Under gradient accumulation DeepSpeed
    ZeRO-2/3 reduce every micro-step's gradients into the rank's partitions (stage_1_and_2.py
    ``reduce_ready_partitions_and_remove_grads``, stage3.py ``partition_grads``): the first one's whole gradients
    are a moment, as the later ones' (AccumulateGrad's new gradient) already are in the trace. FSDP2 with
    ``set_requires_gradient_sync(False)`` keeps each unsharded gradient, accumulating in place, to the last
    micro-step's post-backward, which reduce-scatters it (``_fsdp_param_group.py`` ``post_backward``)."""
    return 0 if rank.plan.zero in (2, 3) else count - 1


def _expert_calls(rank: Rank) -> dict[tuple[str, int], tuple[int, int]]:
    """(experts module, step) -> first and last clock of its forward. Under expert parallelism torchtitan wraps
    each MoE layer's experts in their own ``fully_shard`` over the ranks holding the same experts
    (``apply_fsdp``), inside their block's: gathered around their own call, resharded after it."""
    experts = {weight.name.rsplit(".", 1)[0] for weight in rank.weights.values() if expert_weight(weight.name)}
    calls: dict[tuple[str, int], tuple[int, int]] = {}
    for node, attrs in rank.graph.nodes(data=True):
        if node[0] != "op" or attrs["phase"] != "forward":
            continue
        name: str = attrs["module"]
        end = name.find(EXPERTS_MODULE) + len(EXPERTS_MODULE)
        module = name[:end]  # the experts module an op runs in, or inside
        if module in experts and name[end : end + 1] in ("", "."):
            key, clock = (module, attrs["step"]), attrs["clock_after"]
            first, last = calls.get(key, (clock, clock))
            calls[key] = (min(first, clock), max(last, clock))
    return calls


class StepWindows:
    """One step's gather and reduce moments per block (decoder layer) and for the root."""

    def __init__(
        self,
        rank: Rank,
        step: int,
        micro: MicroStep,
        calls: list[tuple[int, UnitRecord]],
        unpacks: dict[int, list[int]],
        groups: dict[str, list[Weight]],
        *,
        experts: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        """``micro``: the forward and backward of the step these windows are in (one of its micro-steps under
        gradient accumulation). ``experts``: FSDP groups of their own inside the blocks (expert parallelism), by
        module, with the first and last clock of their forward in this step."""
        self.rank = rank
        self.step = step
        self.first_clock = first_clock = micro.first_clock
        self.calls = sorted(calls, key=lambda item: item[1].first_clock)
        self.groups = groups
        self.grad_sids = {rank.attrs[sid]["owner"]: sid for sid in rank.grads[step]}
        self.grad_clock = grad_clock = {name: clock for name, clock in micro.ready.items() if name in self.grad_sids}
        """Weight name -> the clock its gradient was ready in this micro-step."""
        self.end_of_backward = max(grad_clock.values(), default=micro.last_clock)
        self.forward_end, self.backward_start = micro.forward_end, micro.backward_start
        self.held_to_reduce: dict[str, list[Block]] = defaultdict(list)
        """Under a pipeline: a block's gathered weights, kept until its reduce after the last micro-batch."""
        self.backward: dict[str, tuple[int, int]] = {}
        """Block module -> (first, last) clock of its backward: first saved-tensor read, last gradient."""
        for index, unit in self.calls:
            clocks = [grad_clock[w.name] for w in groups.get(unit.module, []) if w.name in grad_clock]
            reads = unpacks.get(index, [])
            if clocks or reads:
                start = min(reads) if reads else min(clocks)
                self.backward[unit.module] = (start, max(clocks) if clocks else max(reads))
        root = [grad_clock[w.name] for w in groups.get("", []) if w.name in grad_clock]
        self.backward[""] = (first_clock, max(root) if root else self.end_of_backward)
        self.experts = experts or {}
        for module in self.experts:  # from its block's backward start (a recompute runs the call again) to its gradients
            block = next((u.module for _, u in self.calls if module.startswith(u.module + ".")), None)
            clocks = [grad_clock[w.name] for w in groups.get(module, []) if w.name in grad_clock]
            if block in self.backward and clocks:
                self.backward[module] = (self.backward[block][0], max(clocks))

    def gradients(self) -> None:
        """Each gradient is whole until its block's reduce, then the rank keeps its shard."""
        rank, plan = self.rank, self.rank.plan
        if not plan.shards_gradients:
            return
        if plan.zero == 3:
            self._zero3_gradients()
            return
        if plan.pipelined:
            self._reduces_after_the_last_micro_batch()
            return
        ordered = sorted(self.backward.items(), key=lambda item: item[1][1])
        order = [module for module, _ in ordered if any(w.name in self.grad_sids for w in self.groups.get(module, []))]
        for position, module in enumerate(order):
            end = self.backward[module][1]
            sids = [self.grad_sids[w.name] for w in self.groups.get(module, []) if w.name in self.grad_sids]
            if not sids:
                continue
            if plan.fsdp != "no":  # the reduce-scatter input, freed when the next block's reduce begins
                last = position + 1 == len(order)  # the root's final callback frees the last one
                until = self.end_of_backward if last else self.backward[order[position + 1]][1]
                total = sum(rank.padded_bytes(sid) for sid in sids)
                rank.add(
                    total,
                    COMMUNICATION,
                    "fsdp.reduce_scatter_input",
                    module=module,
                    phase="backward",
                    step=self.step,
                    alloc_at=rank.at(end, 2),
                    free_at=rank.at(until, 3 if last or until == end else 2),
                )
                rank.buffers["FSDP reduce-scatter input (largest block)"] = max(
                    total, rank.buffers.get("FSDP reduce-scatter input (largest block)", 0)
                )
            for sid in sids:
                self._reshard_gradient(sid, end if plan.fsdp != "no" else None)

    def _reduces_after_the_last_micro_batch(self) -> None:
        """FSDP2 under torch.distributed.pipelining (``stage.py``): every micro-batch's backward runs with
        ``set_requires_gradient_sync(False)`` and ``set_reshard_after_backward(False)``, so the stage's gradients
        stay whole and its weights gathered; after the last, ``perform_reduce_grad`` runs each group's
        ``post_backward``, the root first, then the blocks in order: reshard, drop the previous reduce-scatter
        input, fill this one from the whole gradients, drop them, keep the shard."""
        rank, end = self.rank, self.end_of_backward
        previous: Block | None = None
        for module in ["", *(unit.module for _, unit in self.calls)]:
            sids = [self.grad_sids[w.name] for w in self.groups.get(module, []) if w.name in self.grad_sids]
            for block in self.held_to_reduce.pop(module, []):
                block.free_at = rank.at(end, 2)
            if not sids:
                continue
            if previous is not None:
                previous.free_at = rank.at(end, 2)
            total = sum(rank.padded_bytes(sid) for sid in sids)
            rank.add(
                total,
                COMMUNICATION,
                "fsdp.reduce_scatter_input",
                module=module,
                phase="backward",
                step=self.step,
                alloc_at=rank.at(end, 2),
                free_at=None,
            )
            previous = rank.blocks[-1]
            key = "FSDP reduce-scatter input (largest block)"
            rank.buffers[key] = max(total, rank.buffers.get(key, 0))
            kept = [rank.blocks[sid].free_at for sid in sids]
            for sid in sids:  # copied in, the whole gradients are dropped before the output is made
                rank.blocks[sid].free_at = rank.at(end, 2)
                rank.blocks[sid].category = "temporaries"
            for sid, free_at in zip(sids, kept, strict=True):
                block = rank.blocks[sid]
                rank.add(
                    rank.shard_of(sid),
                    "gradients",
                    "reduce_scatter",
                    module=block.module,
                    phase="backward",
                    step=block.step,
                    alloc_at=rank.at(end, 2),
                    free_at=free_at,
                )
        if previous is not None:  # the root's final callback
            previous.free_at = rank.at(end, 3)

    def _reshard_gradient(self, sid: int, reduced: int | None) -> None:
        """The whole gradient lives to ``reduced`` (FSDP) or only its own moment (ZeRO-2's bucket copy)."""
        rank = self.rank
        block = rank.blocks[sid]
        whole_free = rank.at(reduced, 3) if reduced is not None and reduced > block.alloc_at[0] else rank.at(block.alloc_at[0], 5)
        sharded_at = rank.at(whole_free[0], 4)
        rank.add(
            rank.shard_of(sid),
            "gradients",
            "reduce_scatter",
            module=block.module,
            phase="backward",
            step=block.step,
            alloc_at=sharded_at,
            free_at=block.free_at,
        )
        if block.free_at is not None and block.free_at < sharded_at:
            rank.blocks[-1].free_at = rank.at(sharded_at[0], 5)
        block.free_at = whole_free
        if reduced is not None and len(rank.micro_steps[self.step]) > 1:  # accumulated whole until the reduce
            rank.whole_gradients.add(sid)
        else:
            block.category = "temporaries"  # the whole gradient is a moment's copy now

    def _zero3_gradients(self) -> None:
        """ZeRO-3 reduces each gradient into a flat buffer of the rank's partitions, made at start-up."""
        rank = self.rank
        sids = list(self.grad_sids.values())
        for sid in sids:
            block = rank.blocks[sid]
            block.free_at = rank.at(block.alloc_at[0], 5)
            block.category = "temporaries"
        if self.step == 0:
            total = sum(rank.shard_of(sid) for sid in sids)
            rank.add(total, "gradients", "zero3.grad_partitions", alloc_at=rank.at(0, 4), free_at=None)

    def gathers(self) -> None:
        """Each block's weights gathered around its forward and its backward."""
        if self.rank.plan.fsdp != "no":
            self._fsdp_gathers()
        else:
            self._zero3_gathers()

    def _fsdp_gathers(self) -> None:
        """FSDP2 as torch 2.13's ``_fsdp_param_group.py`` runs it: in forward a group's flat all-gather
        output is kept until the next group's copy-out is done (``all_gather_state``) and the root's
        post-forward frees the last; in backward a group's pre-backward copies its own out, frees that output and
        prefetches the next group's (``_backward_prefetch``; the root's pre-backward prefetches the first)."""
        rank = self.rank
        reshard = rank.plan.reshards_after_forward
        calls = [(u.module, u.first_clock, u.last_clock) for _, u in self.calls]
        calls += [(module, first, last) for module, (first, last) in self.experts.items()]
        forward = [
            ("", self.first_clock, self.backward[""][1]),
            *sorted(
                ((module, first, last if reshard else self.backward.get(module, (0, last))[1]) for module, first, last in calls),
                key=lambda item: item[1],
            ),
        ]
        kept: Block | None = None
        for module, start, end in forward:
            weights = self.groups.get(module, [])
            if not weights:
                continue
            output = self._all_gather_output(weights, module, rank.at(start, 2), "forward")
            self._unsharded(weights, module, start, end, "forward", to_reduce=not module or not reshard)
            if kept is not None:  # ``wait_for_unshard``'s local ``prev_all_gather_state`` holds it past the copy-out
                kept.free_at = rank.at(start, 5)
            kept = output
        if kept is not None:
            kept.free_at = rank.at(self.forward_end, 3)
        largest = max(
            (
                sum(
                    w.numel
                    for g, weights in self.groups.items()
                    if g == u.module or g.startswith(u.module + ".")
                    for w in weights
                )
                for _, u in self.calls
            ),
            default=0,
        )  # a block with its experts
        rank.gathered = max(rank.gathered, largest + sum(w.numel for w in self.groups.get("", [])))
        if not reshard:
            return
        backward = sorted(((m, s - 1, e) for m, (s, e) in self.backward.items() if m), key=lambda item: item[1])
        prefetch_at = self.backward_start - 1
        for module, start, end in backward:
            weights = self.groups.get(module, [])
            if not weights:
                continue
            output = self._all_gather_output(weights, module, rank.at(prefetch_at, 4), "backward")
            self._unsharded(weights, module, start, end, "backward", to_reduce=True)
            output.free_at = rank.at(start, 4)  # copied out, then dropped, before the next prefetch
            prefetch_at = start

    def _all_gather_output(self, weights: list[Weight], module: str, at: Position, phase: str) -> Block:
        """FSDP2's flat all-gather output of a group (every rank's padded shard; the input is a view into it)."""
        rank = self.rank
        total = sum(rank.gathered_bytes(w, padded=True) for w in weights)
        if rank.plan.offload == "params":  # CPUOffloadPolicy: each shard is copied to the device to fill the input
            shards = sum(rank.gathered_bytes(w, padded=True) // rank.ranks_of(w.name) for w in weights)
            rank.add(
                shards,
                "temporaries",
                "fsdp.offload_copy_in",
                module=module,
                phase=phase,
                step=self.step,
                alloc_at=rank.at(at[0], at[1]),
                free_at=rank.at(at[0], 5),
            )
        rank.add(
            total, COMMUNICATION, "fsdp.all_gather_output", module=module, phase=phase, step=self.step, alloc_at=at, free_at=None
        )
        key = "FSDP all-gather output (largest block)"
        rank.buffers[key] = max(total, rank.buffers.get(key, 0))
        return rank.blocks[-1]

    def _unsharded(
        self, weights: list[Weight], module: str, start: int, end: int, phase: str, *, to_reduce: bool = False
    ) -> None:
        """Each weight's unsharded copy from the copy-out to the reshard (a reshard at the next group's
        start comes before that group's all-gather), padded as its shards are: FSDP2's parameter is a view of its
        own all-gather output of world size x padded shard (``_fsdp_param.py`` ``init_all_gather_outputs``).
        ``to_reduce``: the copy is kept to the block's backward, which under a pipeline holds it to the reduce
        after the last micro-batch (``held_to_reduce``)."""
        rank = self.rank
        deferred = to_reduce and rank.plan.pipelined
        for weight in weights:
            free = None if deferred else rank.at(end, 2) if end > start else rank.at(end, 5)
            rank.add(
                rank.gathered_bytes(weight, padded=True),
                "parameters",
                "all_gather",
                module=module,
                phase=phase,
                step=self.step,
                alloc_at=rank.at(start, 4),
                free_at=free,
            )
            if deferred:
                self.held_to_reduce[module].append(rank.blocks[-1])

    def _zero3_gathers(self) -> None:
        """ZeRO-3: a block's weights around its forward and its backward, with part of the next prefetched."""
        rank = self.rank
        forward = [(u.module, u.first_clock, u.last_clock) for _, u in self.calls]
        self._gather_chain(forward, "forward")
        # gathered before the clock of the first saved-tensor read, so before a checkpoint's recompute there
        backward = sorted(((m, s - 1, e) for m, (s, e) in self.backward.items() if m), key=lambda item: item[1])
        self._gather_chain(backward, "backward")
        root = [w for w in self.groups.get("", []) if rank.sharded_weight(w)]
        self._gather(root, "", self.first_clock, self.first_clock, self.backward[""][1], "forward")
        largest = max((sum(w.numel for w in self.groups.get(m, []) if rank.sharded_weight(w)) for m, _, _ in forward), default=0)
        settings = rank.plan.zero_settings
        live = largest + min(largest, settings.prefetch_bucket) + sum(w.numel for w in root)
        rank.gathered = max(rank.gathered, live)
        if live > settings.max_live_parameters:
            note = (
                f"{live:,} weight elements gathered at once exceed stage3_max_live_parameters "
                f"({settings.max_live_parameters:,}): DeepSpeed would release some sooner"
            )
            if note not in rank.notes:
                rank.notes.append(note)

    def _gather_chain(self, windows: list[tuple[str, int, int]], phase: str) -> None:
        """Windows in run order; each block's gather starts in the previous block's window (prefetch)."""
        for position, (module, start, end) in enumerate(windows):
            weights = [w for w in self.groups.get(module, []) if self.rank.sharded_weight(w)]
            early = windows[position - 1][1] if position else start
            self._gather(weights, module, early, start, end, phase)

    def _gather(self, weights: list[Weight], module: str, early: int, start: int, end: int, phase: str) -> None:
        """ZeRO-3's whole copies of ``weights`` to ``end``: the first prefetch bucket's worth from ``early``."""
        rank = self.rank
        if not weights:
            return
        fetched = 0
        for weight in weights:
            ahead = fetched + weight.numel <= rank.plan.zero_settings.prefetch_bucket
            fetched += weight.numel
            clock = early if ahead else start
            rank.add(
                rank.gathered_bytes(weight),
                "parameters",
                "all_gather",
                module=module,
                phase=phase,
                step=self.step,
                alloc_at=rank.at(clock, 4),
                free_at=rank.at(end, 3) if end > clock else rank.at(end, 5),
            )


def block_groups(modules: Iterable[str], weights: Iterable[Weight]) -> dict[str, list[Weight]]:
    """Weights by the block that holds them; ``""`` gathers the rest (FSDP2's root)."""
    blocks = sorted(set(modules), key=len, reverse=True)
    found: dict[str, list[Weight]] = defaultdict(list)
    for weight in weights:
        owner = next((m for m in blocks if weight.name.startswith(m + ".")), "")
        found[owner].append(weight)
    return found
