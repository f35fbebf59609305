"""A program of several named modules: module paths follow each root, and the prediction is the real run's."""

from __future__ import annotations

import contextlib

import torch

from vramsim.analysis.device_memory import device_memory
from vramsim.estimators.timeline import derive_timeline
from vramsim.tracer.categories import Phase
from vramsim.tracer.graph import build_graph
from vramsim.validation.measure import measure_program_cpu
from vramsim.workload.program import Program, StepObserver
from vramsim.workload.targets import resolve_target
from vramsim.workload.tracing import trace_program


def encode_decode_step(program: Program, observer: StepObserver) -> None:
    """Train an encoder and a decoder together: two roots, one step."""
    observer.set_phase(Phase.FORWARD)
    hidden = program.modules["encoder"](program.batch["x"])
    loss = program.modules["decoder"](hidden).pow(2).mean()
    del hidden
    observer.set_phase(Phase.BACKWARD)
    loss.backward()
    del loss
    observer.set_phase(Phase.OPTIMIZER)
    assert program.optimizer is not None
    program.optimizer.step()
    program.optimizer.zero_grad(set_to_none=True)


def build(device: str) -> Program:
    with torch.device(device):
        encoder = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
        decoder = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 32))
        batch = {"x": torch.randn(64, 32)}
    params = [*encoder.parameters(), *decoder.parameters()]
    return Program(
        modules={"encoder": encoder, "decoder": decoder},
        step=encode_decode_step,
        batch=batch,
        loss=None,
        optimizer=torch.optim.AdamW(params, foreach=False),
        autocast=contextlib.nullcontext,
        max_new_tokens=0,
        steps=2,
    )


def test_two_roots_are_named_and_exact() -> None:
    target = resolve_target("cpu")
    with target.emulation():
        trace = trace_program(build("meta"), devices=target.counted_devices, workspaces=target.rules.workspaces)
    modules = {record.module.split(".")[0] for record in trace.storages if record.module}
    assert modules == {"encoder", "decoder"}
    predicted = device_memory(derive_timeline(build_graph(trace)), target.profile, training=True).peak_bytes
    assert predicted == measure_program_cpu(lambda: build("cpu")).peak_bytes
