"""The schedule of pipeline parallelism: how many micro-batches each stage holds in flight, which of
its backwards holds the most, and the blocks torch.distributed.pipelining adds to a stage's timeline.

In flight: a stage holds the activations of several micro-batches between their forward and
their backward. The traced micro-batch's own are on the timeline; the others are added as copies
of what the stage holds across its forward-to-backward boundary, live through the traced backward
(the oldest micro-batch's backward runs while the others wait and the gradients accumulate). How
many, per rank ``r`` of ``P`` with ``M`` micro-batches, follows torch.distributed.pipelining's
``schedules.py``: GPipe all ``M``; 1F1B ``min(M, P - r)`` (its ``warmup_chunks`` + 0, since a
backward frees one before the next forward); interleaved 1F1B with ``V`` chunks per rank
``_get_warmup_ops`` + 1 chunk-micro-batches, each a ``1/V`` share of the rank's activations.
A backward after the first starts with the gradients accumulated so far: each traced gradient is held
from the backward's start, and the one the traced backward makes is a temporary added into it. Which
backward holds the most is the schedule's: the first (every micro-batch of its warm-up in flight, no
gradient yet) or a later one (as many or fewer in flight, the gradients held, and on a stage that
receives its input the earlier micro-batches' input gradients): each candidate is a timeline of its own,
and the caller keeps the busiest (interleaved 1F1B: its first, with gradients held where it runs more
micro-batches than it holds). torch.distributed.pipelining's own buffers (``stage.py``) are added: a
receive buffer per micro-batch for each activation a stage receives (its input, kept for the run: the
traced copy is dropped) and for the gradient of each one it sends; each micro-batch's input gradient kept
as that buffer's ``.grad`` until the next step; a stage's sent output kept (``fwd_cache``) until its
backward. Checked against torch's schedules run for real under a fake process group
(``tests/ground_truth/test_pipeline_ground_truth.py``); the last stage's ``output_chunks`` (every
micro-batch's output, kept for the step's merged output) are not added.
"""

from __future__ import annotations

from dataclasses import dataclass

from .timeline import Block

__all__ = [
    "INPUT_GRADIENTS",
    "IN_FLIGHT",
    "PP_SCHEDULES",
    "RECEIVE_BUFFERS",
    "Backward",
    "PipelinePlan",
    "backwards",
    "held_copies",
    "in_flight",
    "pipeline_plan",
    "receive_buffers",
]

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
IN_FLIGHT = "pipeline in flight"
"""The op name of the added copies (category ``activations``)."""
RECEIVE_BUFFERS = "pipeline receive buffers"
"""The op name of torch.distributed.pipelining's receive buffers (category ``communication``)."""
INPUT_GRADIENTS = "pipeline input gradients"
"""The op name of the other micro-batches' gradients of a stage's received inputs, sent back to the stage before
(category ``communication``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backward:
    """One backward of a rank's step as its schedule runs it."""

    in_flight: float
    """Micro-batches whose activations the rank holds (a fraction with interleaving)."""
    earlier: int
    """Micro-batches backwarded before it: their input gradients are held."""
    accumulates: bool
    """Gradients of earlier micro-batches are held from its start, and each new one is added into them."""


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    stages: int = 1
    schedule: str = "1f1b"
    micro_batches: int = 1
    virtual_stages: int = 1
    """Chunks per rank: more than 1 only for interleaved 1F1B."""

    @property
    def active(self) -> bool:
        return self.stages > 1


def pipeline_plan(stages: int, schedule: str, micro_batches: int | None, virtual_stages: int) -> PipelinePlan:
    """The plan for these options; ``ValueError`` naming the choices otherwise."""
    for name, value in (("pp", stages), ("pp_virtual_stages", virtual_stages)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    text = str(schedule).strip().lower()
    if text not in PP_SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; choose one of: {', '.join(PP_SCHEDULES)}")
    m = stages if micro_batches is None else micro_batches
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"micro_batches must be a positive integer, got {micro_batches!r}")
    if text == "interleaved-1f1b" and m % max(1, m // stages):
        raise ValueError(
            f"interleaved 1F1B needs micro-batches a multiple of the rounds ({max(1, m // stages)}), got {m} "
            "(torch.distributed.pipelining ScheduleInterleaved1F1B)"
        )
    return PipelinePlan(
        stages=stages, schedule=text, micro_batches=m, virtual_stages=virtual_stages if text == "interleaved-1f1b" else 1
    )


def in_flight(plan: PipelinePlan, rank: int) -> float:
    """Micro-batches' worth of the rank's activations held at once (a fraction with interleaving)."""
    p, m, v = plan.stages, plan.micro_batches, plan.virtual_stages
    if plan.schedule == "gpipe":
        return m
    if plan.schedule == "1f1b":
        return min(m, p - rank)
    per_round = m // max(1, m // p)
    warmup = min((v - 1) * per_round + 2 * (p - 1 - rank), m * v)  # schedules.py _get_warmup_ops
    chunks = warmup + 1 if warmup < m * v else warmup  # the 1F1B phase runs a forward before each backward
    return chunks / v


def backwards(plan: PipelinePlan, rank: int, held: int, received: int) -> list[Backward]:
    """The rank's backwards that can hold the most: its first, with every micro-batch in flight and no gradient
    accumulated yet, and the later one with the most held by the schedule's count in flight and the earlier
    micro-batches' input gradients (``flight x held + earlier x received`` is the same program otherwise); the
    first is left out where that later one holds as many in flight. Interleaved 1F1B: one backward, its in
    flight count, the input gradients not counted."""
    count = in_flight(plan, rank)
    m = plan.micro_batches
    if plan.schedule == "interleaved-1f1b" or m == 1:
        return [Backward(in_flight=count, earlier=0, accumulates=count < m)]

    def flight(k: int) -> float:  # micro-batches in flight at the k-th backward (torch's schedules.py order)
        return m - k + 1 if plan.schedule == "gpipe" else min(count, m - k + 1)

    later = max(range(2, m + 1), key=lambda k: flight(k) * held + (k - 1) * received)
    worst = Backward(in_flight=flight(later), earlier=later - 1, accumulates=True)
    return [worst] if flight(later) >= count else [Backward(in_flight=count, earlier=0, accumulates=False), worst]


def held_copies(
    plan: PipelinePlan,
    ends: dict[int, int],
    *,
    step_clocks: list[tuple[int, int]],
    forward_end: dict[int, int],
    backward_start: dict[int, int],
    extra: int,
    backward: Backward,
    received: int,
) -> list[Block]:
    """The other micro-batches in flight (copies of what the stage holds across its forward-to-backward
    boundary, live through the traced backward) and the input gradients torch.distributed.pipelining keeps
    (``stage.py``: each micro-batch's gradient of its received input stays as that buffer's ``.grad`` until the
    next step's ``clear_runtime_states``): the earlier ones through the traced backward, the later ones from its
    end."""
    added = []
    for step, end in ends.items():  # the end of the stage's backward in each step
        step_end = step_clocks[step][1]
        if extra > 0:
            added.append(
                Block(
                    nbytes=extra,
                    category="activations",
                    module="",
                    phase="forward",
                    op=IN_FLIGHT,
                    step=step,
                    alloc_at=(forward_end[step], 4, 0),
                    free_at=(end, 3, 0),
                )
            )
        if received and backward.earlier:
            added.append(_input_gradients(received * backward.earlier, step, backward_start.get(step, end), step_end))
        later = plan.micro_batches - backward.earlier - 1
        if received and later > 0:
            added.append(_input_gradients(received * later, step, end, step_end))
    return added


def _input_gradients(nbytes: int, step: int, start: int, step_end: int) -> Block:
    """Micro-batches' gradients of the stage's received inputs, held from the clock ``start`` to the step's end."""
    return Block(
        nbytes=nbytes,
        category="communication",
        module="",
        phase="backward",
        op=INPUT_GRADIENTS,
        step=step,
        alloc_at=(start, 4, 0),
        free_at=(step_end, 3, 0),
    )


def receive_buffers(plan: PipelinePlan, inputs: int, outputs: int) -> list[Block]:
    """torch.distributed.pipelining's receive buffers (``stage.py``), made when the schedule first runs and kept:
    one per micro-batch for the activations a stage receives (``args_recv_info``; they are its inputs) and one per
    micro-batch for the gradients of what it sends (``grad_recv_info``)."""
    return [
        Block(
            nbytes=nbytes * plan.micro_batches,
            category="communication",
            module="",
            phase="setup",
            op=RECEIVE_BUFFERS,
            step=-1,
            alloc_at=(0, 4, 0),
            free_at=None,
        )
        for nbytes in (inputs, outputs)
        if nbytes
    ]
