"""Run a workload on the meta device under the tracer and return its records."""

from __future__ import annotations

import re
from typing import Any

from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.data_dependent import forget_seeds
from vramsim.tracer.mode import MemoryTracer, WorkspaceRule
from vramsim.tracer.records import Trace
from vramsim.tracer.scope import ModuleScope

from .errors import TraceError, VramsimError, first_line
from .workload import Workload, run_workload

__all__ = ["trace_workload"]


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
        self._tracer.mark_all(tensors, category)


_MISSING_META_KERNEL = re.compile(
    r"Could not run '([\w:.]+)' with arguments from the 'Meta' backend"
    r"|^([\w:.]+): attempted to run this operator with Meta tensors"
)
"""The two ways PyTorch says an op has no meta kernel (built-in ops, and custom ops)."""


def trace_workload(
    work: Workload, *, devices: frozenset[str], workspaces: WorkspaceRule | None = None, moe_routing: str = "balanced"
) -> Trace:
    """Trace ``work`` counting storages on ``devices`` (``meta`` stands for the target).

    ``moe_routing`` is the load MoE routers are assumed to give experts (``tracer/data_dependent.py``).
    """
    scope = ModuleScope(work.model)
    tracer = MemoryTracer(scope, devices=devices, workspaces=workspaces, moe_routing=moe_routing)
    tracer.register_module(work.model)
    try:
        with scope, tracer:
            run_workload(work, _TracerObserver(tracer))
    except VramsimError:
        raise
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError, AttributeError) as exc:
        where = (tracer.trace.ops[-1].module if tracer.trace.ops else "") or type(work.model).__name__
        missing = _MISSING_META_KERNEL.search(str(exc))
        if missing:
            op = missing.group(1) or missing.group(2)
            raise TraceError(
                f"{type(work.model).__name__} calls {op} at {where}, which has no meta kernel; "
                f"register one with torch.library.register_fake('{op}') or replace that call"
            ) from exc
        raise TraceError(f"{type(work.model).__name__} failed on the meta device at {where}: {first_line(exc)}") from exc
    finally:
        forget_seeds()
    return tracer.trace

