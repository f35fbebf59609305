"""Views and in-place ops allocate nothing; the timeline derived from the graph is the recorded one."""

from __future__ import annotations

from itertools import accumulate

import pytest
import torch

from vramsim.config import SimulationConfig
from vramsim.estimators.liveness import liveness
from vramsim.estimators.timeline import derive_timeline
from vramsim.tracer.categories import Phase
from vramsim.tracer.graph import build_graph
from vramsim.tracer.mode import MemoryTracer
from vramsim.tracer.records import Trace
from vramsim.tracer.scope import ModuleScope
from vramsim.workload.build import build_program
from vramsim.workload.targets import resolve_target
from vramsim.workload.tracing import trace_program


def trace_fn(fn) -> Trace:  # type: ignore[no-untyped-def]
    scope = ModuleScope()
    tracer = MemoryTracer(scope, devices={"meta"})
    with scope, tracer:
        scope.phase = Phase.FORWARD
        fn()
    return tracer.trace


def test_views_allocate_nothing() -> None:
    """view, transpose, slicing, expand, detach and as_strided share their base's storage."""
    x = torch.empty(8, 16, device="meta")

    def program() -> None:
        x.view(16, 8).t()[2:4].unsqueeze(0).expand(3, -1, -1)
        x.detach().as_strided((4,), (2,))
        x.reshape(128)

    trace = trace_fn(program)
    assert [s.op for s in trace.storages] == ["<pre-existing>"]
    assert all(not op.outputs for op in trace.ops)


def test_inplace_ops_allocate_nothing() -> None:
    x = torch.empty(8, 16, device="meta")

    def program() -> None:
        x.add_(1).mul_(2).relu_()
        x[0].zero_()

    trace = trace_fn(program)
    assert len(trace.storages) == 1 and not trace.events


def test_out_of_place_allocates_and_frees() -> None:
    """A temporary is allocated with its exact bytes and freed when the program drops it."""
    x = torch.empty(8, 16, device="meta")

    def program() -> None:
        y = x * 2  # (8, 16) float32
        del y

    trace = trace_fn(program)
    made = trace.storages[1]
    assert (made.op, made.nbytes, made.shape, made.dtype) == ("aten.mul", 8 * 16 * 4, (8, 16), "float32")
    assert trace.events == [(1, True), (1, False)]


def live_bytes(trace: Trace) -> list[int]:
    """Live bytes after each recorded event, replayed from the event list alone."""
    baseline = sum(s.nbytes for s in trace.storages if s.alloc_clock == 0)
    steps = [trace.storages[sid].nbytes * (1 if is_alloc else -1) for sid, is_alloc in trace.events]
    return list(accumulate(steps, initial=baseline))[1:]


CASES = {
    "llama-train": ("tiny_llama", dict(task="train")),
    "llama-train-ckpt-bf16": ("tiny_llama", dict(task="train", gradient_checkpointing=True, mixed_precision="bf16")),
    "gpt2-generate": ("tiny_gpt2", dict(task="generate", max_new_tokens=4)),
    "bert-forward": ("tiny_bert", dict(task="forward")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_timeline_is_the_recorded_one(case: str, request: pytest.FixtureRequest) -> None:
    fixture, options = CASES[case]
    config = SimulationConfig(batch_size=2, seq_len=16, device="cpu", **options)
    target = resolve_target("cpu")
    with target.emulation() as emulation:
        program = build_program(request.getfixturevalue(fixture), config, device="meta", emulation=emulation)
        trace = trace_program(program, devices=target.counted_devices, workspaces=target.rules.workspaces)
    timeline = derive_timeline(build_graph(trace))
    preexisting = [s.sid for s in trace.storages if s.alloc_clock == 0]
    assert timeline.events == [(sid, True) for sid in preexisting] + trace.events
    assert timeline.preexisting == len(preexisting)
    assert liveness(timeline).allocated[len(preexisting) :] == live_bytes(trace)


def test_a_module_called_by_keyword_leaves_the_backward_scope() -> None:
    """transformers calls attention by keyword (``self_attn(hidden_states=...)``): once its backward is
    done, what the earlier layer allocates is that layer's, not the keyword-called module's."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = torch.nn.Linear(16, 16, device="meta")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.attn(input=x))

    model = torch.nn.Sequential(torch.nn.Linear(16, 16, device="meta"), Block())
    scope = ModuleScope({"": model})
    tracer = MemoryTracer(scope, devices={"meta"})
    with scope, tracer:
        scope.phase = Phase.FORWARD
        loss = model(torch.empty(4, 16, device="meta")).sum()
        scope.phase = Phase.BACKWARD
        loss.backward()
    first_layer = [s.module for s in tracer.trace.storages if s.phase is Phase.BACKWARD and s.op == "aten.mm"][-1]
    assert first_layer == "0"  # the first Linear's weight gradient, after Block.attn's backward
