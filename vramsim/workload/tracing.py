"""Run a workload on the meta device under the tracer and return its records."""

from __future__ import annotations

import dis
import re
from pathlib import Path
from types import TracebackType
from typing import Any

import vramsim.estimators
import vramsim.model_zoo
import vramsim.tracer
from vramsim.errors import TraceError, VramsimError, first_line
from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.data_dependent import forget_seeds
from vramsim.tracer.mode import MemoryTracer, WorkspaceRule
from vramsim.tracer.records import Trace
from vramsim.tracer.scope import ModuleScope
from vramsim.workload.optimizers import paged_states
from vramsim.workload.program import Program, run_program

__all__ = ["trace_program"]


class _TracerObserver:
    """Forwards the workload's step, phase and role facts to the tracer."""

    def __init__(self, tracer: MemoryTracer) -> None:
        self._tracer = tracer

    def begin_step(self, step: int) -> None:
        self._tracer.begin_step(step)

    def end_step(self) -> None:
        self._tracer.end_step()

    def set_phase(self, phase: Phase) -> None:
        self._tracer.scope.phase = phase

    def mark(self, tensors: Any, category: Category) -> None:
        if category == Category.KV_CACHE:  # the generate loop marks its cache as each decode step begins
            self._tracer.trace.decode_clocks.append(len(self._tracer.trace.events))
        self._tracer.mark_all(tensors, category)

    def mark_owned(self, owned: Any, category: Category) -> None:
        for owner, tensor in owned:
            self._tracer.mark(tensor, category, owner)

    def begin_unit(self, module: str, tensors: Any, positional: Any = ()) -> None:
        self._tracer.begin_unit(module, tensors, positional)

    def end_unit(self) -> None:
        self._tracer.end_unit()


_MISSING_META_KERNEL = re.compile(
    r"Could not run '([\w:.]+)' with arguments from the 'Meta' backend"
    r"|^([\w:.]+): attempted to run this operator with Meta tensors"
)
"""The two ways PyTorch says an op has no meta kernel (built-in ops, and custom ops)."""


def trace_program(
    program: Program, *, devices: frozenset[str], workspaces: WorkspaceRule | None = None, moe_routing: str = "balanced"
) -> Trace:
    """Trace ``program`` counting storages on ``devices`` (``meta`` stands for the target).

    ``moe_routing`` is the load MoE routers are assumed to give experts (``tracer/data_dependent/``).
    A ``torch.compile``d program's compiled graphs run under the tracer (``vramsim/workload/compiled.py``).
    An error the program raises on meta is a ``TraceError``; one raised by vramsim's own code
    propagates unchanged, since it is vramsim's bug, not the model's.
    """
    scope = ModuleScope(program.modules)
    tracer = MemoryTracer(
        scope, devices=devices, workspaces=workspaces, moe_routing=moe_routing, compiled=program.compiled is not None
    )
    for name, module in program.modules.items():
        tracer.register_module(module, f"{name}." if name else "")
    try:
        with scope, tracer:
            run_program(program, _TracerObserver(tracer))
    except VramsimError:
        raise
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError, AttributeError) as exc:
        if _raised_by_vramsim(exc.__traceback__):
            raise
        where = (tracer.trace.ops[-1].module if tracer.trace.ops else "") or program.name
        missing = _MISSING_META_KERNEL.search(str(exc))
        if missing:
            op = missing.group(1) or missing.group(2)
            raise TraceError(
                f"{program.name} calls {op} at {where}, which has no meta kernel; "
                f"register one with torch.library.register_fake('{op}') or replace that call"
            ) from exc
        raise TraceError(f"{program.name} failed on the meta device at {where}", quoted=first_line(exc)) from exc
    finally:
        forget_seeds()
    tracer.trace.head_module = _head_module(program)
    tracer.trace.managed = tuple(
        sid for sid in (tracer.sid_of(state) for state in paged_states(program.optimizer)) if sid is not None
    )
    return tracer.trace


def _head_module(program: Program) -> str | None:
    """The path of a single model's output head in the trace (``lm_head``), which torchtune's activation
    offloading keeps on the device; ``None`` for a pipeline or a model without one."""
    if list(program.modules) != [""]:
        return None
    output_embeddings = getattr(program.model, "get_output_embeddings", None)
    head = output_embeddings() if callable(output_embeddings) else None
    return next((name for name, module in program.model.named_modules() if module is head), None)


_OWN_DIRECTORIES = tuple(
    Path(directory).resolve()
    for package in (vramsim, vramsim.tracer, vramsim.estimators, vramsim.model_zoo)
    for directory in package.__path__
)
"""Where vramsim's code lives (``tracer/`` and ``estimators/`` sit beside ``vramsim/`` in a checkout)."""


def _raised_by_vramsim(traceback: TracebackType | None) -> bool:
    """Whether the innermost frame is vramsim's and raised the error itself (a ``raise``, a bad
    attribute or operand) rather than in a call it made: a vramsim frame calling the program's
    op (``func(*args)``) passes that op's error on, and that error is the program's.

    Known limitation: vramsim passing a bad argument to torch reads as the program's error.
    """
    if traceback is None:
        return False
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    code = traceback.tb_frame.f_code
    if not any(Path(code.co_filename).resolve().is_relative_to(d) for d in _OWN_DIRECTORIES):
        return False
    failing = next((i.opname for i in dis.get_instructions(code) if i.offset == traceback.tb_lasti), "")
    return not (failing.startswith("CALL") or failing == "PRECALL")
