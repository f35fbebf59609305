"""A long generation derived from two short ones: decode steps repeat, only their lengths grow.

``--task generate`` runs a prefill, then one forward per new token. Every decode forward runs
the same ops; what changes from one to the next is the token count, so the tensors that hold or
read the cache (a ``DynamicLayer``'s ``torch.cat`` result, the attention mask) grow by the same
bytes each step, and the ones that cannot pass a bound stop growing there (a sliding-window
layer's cat never holds more than its window; CPU flash attention's kv split stops at 512).

So the full program is not traced. Two short runs are: the *head* (the real prompt, a few new
tokens) and the *tail* probe (a prompt as long as the generation's last decode steps see, the
same few new tokens). Their decode steps give the template (events in order, what each frees,
each allocation's role) and, per allocation, its bytes at the first and the last steps: a line
through the head's steps, or that line capped at the constant the tail's steps show. The derived
timeline is the head's, with decode steps ``first_derived .. new_tokens - 1`` made from the
template in between; its allocator replay is then the same code as any other timeline's.

Anything else (a step unlike the others, a size neither linear nor capped, a free reaching back
into the prefill) is a ``ValueError``: the caller traces the whole generation instead.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from dataclasses import dataclass

from .timeline import Block, Position, Timeline

__all__ = ["DecodeRun", "derive_generation"]

_TEMPLATE_FROM = 2
"""First decode step (of a short run) the template is read from: step 1 frees the prefill's cache."""


@dataclass(frozen=True, slots=True)
class DecodeRun:
    """One traced short generation: its timeline and where its decode steps begin."""

    timeline: Timeline
    decode_clocks: list[int]
    """The graph's ``decode_clocks``: per program step, one per decode step plus the loop's end."""
    first_decode: int
    """Which decode step of the long generation its first one stands for (1 for the head)."""


@dataclass(frozen=True, slots=True)
class _Alloc:
    """A template allocation: its role, and its bytes at each decode step the two runs traced."""

    block: Block
    head: dict[int, int]
    tail: dict[int, int]

    def line(self) -> tuple[int, int, int | None]:
        """``(bytes at decode step 0, growth per step, cap or None)``: bytes at step d are
        ``min(base + growth * d, cap)``, the head's line capped at the tail's constant where it has one."""
        first = min(self.head)
        growth = self.head[first + 1] - self.head[first]
        base = self.head[first] - growth * first
        last = max(self.tail)
        return base, growth, None if self.tail[last] == base + growth * last else self.tail[last]

    def check(self) -> None:
        """The head's bytes on a line; the tail's on it too, or at one constant below it (a cap)."""
        first = min(self.head)
        growth = self.head[first + 1] - self.head[first]
        on_line = all(size == self.head[first] + growth * (decode - first) for decode, size in self.head.items())
        line = {decode: self.head[first] + growth * (decode - first) for decode in self.tail}
        capped = {decode: size for decode, size in self.tail.items() if size != line[decode]}
        after = all(decode > other for decode in capped for other in set(self.tail) - set(capped))
        cap_below = growth > 0 and len(set(capped.values())) == 1 and all(size < line[d] for d, size in capped.items())
        if on_line and (not capped or (after and cap_below)):
            return
        raise ValueError(
            f"{self.block.op} at {self.block.module or 'top level'} grows by neither a line nor a capped "
            f"line over the decode steps: {self.head} then {self.tail}"
        )


_Ref = tuple[str, int, int]
"""A template event: ``("alloc", position, 0)``; ``("free", steps back, position)`` of a block
made that many decode steps earlier; ``("free_prefill", key, 0)`` of a block made before them."""


@dataclass(slots=True)
class _Step:
    """One program step of a short run cut at its decode steps."""

    first: int
    """Event index where the step begins."""
    bounds: list[int]
    """Event index where each decode step begins, then where the loop ends."""
    last: int
    """Event index of the step's last event."""


def derive_generation(head: DecodeRun, tail: DecodeRun, new_tokens: int) -> Timeline:
    """The timeline of ``new_tokens`` generated, from the head's timeline and both runs' decode steps."""
    head_steps, tail_steps = _steps(head), _steps(tail)
    if len(head_steps) != len(tail_steps):
        raise ValueError("the two short runs have different step counts")
    blocks = [block.copy() for block in head.timeline.blocks]
    events: list[tuple[int, bool]] = list(head.timeline.events[: head_steps[0].first])
    spans: list[tuple[int, int]] = []
    carried: dict[int, int] = {}
    for mine, probe in zip(head_steps, tail_steps, strict=True):
        template, allocs = _template(head, mine, tail, probe, new_tokens)
        first = len(events)
        carried = _emit_step(head.timeline, mine, template, allocs, new_tokens, blocks, events, carried)
        spans.append((first, len(events) - 1))
    events.extend(_carry(head.timeline.events[head_steps[-1].last + 1 :], carried))
    _place(blocks, events, head.timeline.preexisting)
    return Timeline(blocks=blocks, events=events, preexisting=head.timeline.preexisting, steps=spans)


def _place(blocks: list[Block], events: list[tuple[int, bool]], preexisting: int) -> None:
    """Give every block the positions of its events (one clock per event), refusing a double free."""
    for block in blocks:
        block.free_at = None
    live: set[int] = set()
    for index, (key, is_alloc) in enumerate(events):
        at: Position = (index + 1, 0, 0) if index >= preexisting else blocks[key].alloc_at
        if is_alloc:
            blocks[key].alloc_at = at
            live.add(key)
        elif key in live:
            blocks[key].free_at = at
            live.remove(key)
        else:
            raise ValueError(f"the derived generation frees block {key} ({blocks[key].op}) that is not live")


def _steps(run: DecodeRun) -> list[_Step]:
    """Cut each program step of ``run`` at its decode clocks (the same number in every step)."""
    timeline = run.timeline
    positions: list[Position] = []
    for key, alloc in timeline.events:
        block = timeline.blocks[key]
        positions.append(block.alloc_at if alloc or block.free_at is None else block.free_at)
    marks = [bisect_left(positions, (clock + 1, 0, 0)) for clock in run.decode_clocks]
    steps = []
    for first, last in timeline.steps:
        bounds = [mark for mark in marks if first <= mark <= last + 1]
        if len(bounds) < _TEMPLATE_FROM + 3:
            raise ValueError(f"a short run has {len(bounds) - 1} decode steps, fewer than the template needs")
        steps.append(_Step(first=first, bounds=bounds, last=last))
    if len({len(step.bounds) for step in steps}) != 1:
        raise ValueError("the steps of a short run decode different numbers of tokens")
    return steps


def _signatures(run: DecodeRun, step: _Step) -> tuple[list[list[_Ref]], dict[int, tuple[int, int]]]:
    """Each decode step's events as template references, and ``key -> (decode step, position)``."""
    made: dict[int, tuple[int, int]] = {}
    signatures = []
    for number, (begin, end) in enumerate(itertools.pairwise(step.bounds), start=1):
        refs: list[_Ref] = []
        position = 0
        for key, is_alloc in run.timeline.events[begin:end]:
            if is_alloc:
                made[key] = (number, position)
                refs.append(("alloc", position, 0))
                position += 1
            elif key in made:
                refs.append(("free", number - made[key][0], made[key][1]))
            else:
                refs.append(("free_prefill", key, 0))
        signatures.append(refs)
    return signatures, made


def _role(block: Block) -> tuple[str, str, str, str]:
    return (block.category, block.module, block.phase, block.op)


def _template(head: DecodeRun, mine: _Step, tail: DecodeRun, probe: _Step, new_tokens: int) -> tuple[list[_Ref], list[_Alloc]]:
    """The decode step every derived one repeats, with each allocation's traced bytes by decode step."""
    head_refs, _ = _signatures(head, mine)
    tail_refs, _ = _signatures(tail, probe)
    template = head_refs[_TEMPLATE_FROM - 1]
    if any(kind == "free_prefill" for kind, _, _ in template):
        raise ValueError("a decode step frees a tensor the prefill made")
    samples: list[tuple[DecodeRun, _Step, int]] = [(head, mine, number) for number in range(_TEMPLATE_FROM, len(head_refs) + 1)]
    samples += [(tail, probe, number) for number in range(_TEMPLATE_FROM, len(tail_refs) + 1)]
    allocs: list[_Alloc] = []
    for run, step, number in samples:
        refs = (head_refs if run is head else tail_refs)[number - 1]
        if refs != template:
            raise ValueError(f"decode step {run.first_decode + number - 1} runs differently from decode step {_TEMPLATE_FROM}")
        begin, end = step.bounds[number - 1], step.bounds[number]
        made = [run.timeline.blocks[key] for key, is_alloc in run.timeline.events[begin:end] if is_alloc]
        if not allocs:
            allocs = [_Alloc(block, {}, {}) for block in made]
        for alloc, block in zip(allocs, made, strict=True):
            if _role(block) != _role(alloc.block):
                raise ValueError(
                    f"decode step {run.first_decode + number - 1} allocates {block.op} where another step "
                    f"allocates {alloc.block.op}"
                )
            (alloc.head if run is head else alloc.tail)[run.first_decode + number - 1] = block.nbytes
    if tail.first_decode + _TEMPLATE_FROM - 1 <= head.first_decode + len(head_refs) - 1:
        raise ValueError(f"{new_tokens} new tokens: the tail probe overlaps the head")
    for alloc in allocs:
        alloc.check()
    return template, allocs


def _carry(events: list[tuple[int, bool]], carried: dict[int, int]) -> list[tuple[int, bool]]:
    """``events`` with the frees of blocks a previous step's traced decode steps made moved to the
    derived last ones (state a layer keeps until its next call, such as LLM.int8's outlier columns)."""
    return [(key if is_alloc else carried.get(key, key), is_alloc) for key, is_alloc in events]


def _traced_allocations(timeline: Timeline, step: _Step) -> tuple[dict[tuple[int, int], int], dict[int, tuple[int, int]]]:
    """The traced decode steps' allocations both ways: ``(decode step, position)`` to block key, and back."""
    keys: dict[tuple[int, int], int] = {}
    made: dict[int, tuple[int, int]] = {}
    for decode, (begin, end) in enumerate(itertools.pairwise(step.bounds), start=1):
        allocated = [key for key, is_alloc in timeline.events[begin:end] if is_alloc]
        for position, key in enumerate(allocated):
            keys[decode, position] = key
            made[key] = (decode, position)
    return keys, made


def _derived_blocks(lines: list[tuple[int, int, int | None]], roles: list[Block], decode: int) -> list[Block]:
    """The blocks of derived decode step ``decode``: each template block's size on its line, capped where it stops growing."""
    return [
        Block(
            nbytes=base + growth * decode if cap is None else min(base + growth * decode, cap),
            category=role.category,
            module=role.module,
            phase=role.phase,
            op=role.op,
            step=role.step,
            alloc_at=role.alloc_at,
            free_at=None,
        )
        for (base, growth, cap), role in zip(lines, roles, strict=True)
    ]


def _emit_step(
    timeline: Timeline,
    step: _Step,
    template: list[_Ref],
    allocs: list[_Alloc],
    new_tokens: int,
    blocks: list[Block],
    events: list[tuple[int, bool]],
    carried: dict[int, int],
) -> dict[int, int]:
    """Append one program step: the head's prefill and traced decode steps, derived ones up to
    ``new_tokens - 1``, then the head's loop end with its frees moved to the last decode steps' blocks.
    Returns, for what later events may free, each traced decode block's stand-in among the last ones."""
    traced = len(step.bounds) - 1
    keys, made = _traced_allocations(timeline, step)
    events.extend(_carry(timeline.events[step.first : step.bounds[-1]], carried))
    lines = [alloc.line() for alloc in allocs]
    roles = [alloc.block for alloc in allocs]
    starts: dict[int, int] = {}
    compiled = [
        (kind == "alloc", 0 if kind == "alloc" else first, first if kind == "alloc" else second)
        for kind, first, second in template
    ]
    reach = max((back for _, back, _ in compiled), default=0)
    for decode in range(traced + 1, new_tokens):
        starts[decode] = len(blocks)
        blocks.extend(_derived_blocks(lines, roles, decode))
        if decode - reach > traced:  # every block it frees was derived: one offset each
            events.extend([(starts[decode - back] + position, alloc) for alloc, back, position in compiled])
            continue
        for alloc, back, position in compiled:
            if alloc or decode - back > traced:
                events.append((starts[decode - back] + position, alloc))
            else:
                events.append((keys[decode - back, position], False))

    def stand_in(key: int) -> int:
        decode, position = made[key]
        moved = new_tokens - 1 - (traced - decode)
        return starts[moved] + position if moved > traced else keys[moved, position]

    for key, is_alloc in timeline.events[step.bounds[-1] : step.last + 1]:
        if is_alloc:
            raise ValueError("the generate loop allocates after its last decode step")
        events.append((stand_in(key) if key in made else carried.get(key, key), False))
    return {key: stand_in(key) for key in made}
