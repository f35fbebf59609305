"""``--compile``: the graphs AOTAutograd's min-cut partitioner chooses, run op by op under the tracer.

``torch.compile`` with inductor runs a forward graph that returns the tensors backward needs and
a backward graph that reads them; which intermediates are saved and which are recomputed is
decided by ``min_cut_rematerialization_partition`` (torch/_functorch/partitioners.py) on the
joint graph, after inductor's decompositions. On meta the same dynamo capture, decompositions
and partitioner run (``estimators.assumptions.COMPILE_MODELLED``); only inductor's code
generation is left out: each graph is interpreted node by node, every value freed after its
last use (inductor's wrapper deletes each buffer there), so the tracer sees the saved set the
partitioner chose and each op's own output. Code between graphs (graph breaks) runs eagerly.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from .quiet import quiet_joint_trace

__all__ = ["CompiledGraphs", "compile_model"]


@dataclass(slots=True)
class CompiledGraphs:
    """The partitioned graphs a compiled model ran while traced, counted for the report's note."""

    forward: set[int] = field(default_factory=set)
    """Forward (and inference) graphs run, by ``id`` of their GraphModule."""
    backward: set[int] = field(default_factory=set)

    def describe(self) -> str:
        return f"{len(self.forward)} forward and {len(self.backward)} backward graph(s) ran"

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
        """Inductor's path up to its code generation: its decompositions and its partitioner."""
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.partitioners import min_cut_rematerialization_partition
        from torch._inductor.compile_fx import select_decomp_table

        with quiet_joint_trace(), _composites_differentiable_on_meta():
            return aot_autograd(  # type: ignore[no-any-return]
                fw_compiler=functools.partial(_interpreted, runs=self.forward),
                bw_compiler=functools.partial(_interpreted, runs=self.backward),
                decompositions=select_decomp_table(),
                partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
            )(gm, example_inputs)


@contextlib.contextmanager
def _composites_differentiable_on_meta() -> Iterator[None]:
    """Let the joint trace differentiate composite ops on meta as it does on a device.

    torch/_meta_registrations.py ``activate_meta`` registers each op's Python decomposition as its
    Meta kernel, CompositeImplicitAutograd ops included (``aten.nll_loss``). AOTAutograd traces
    under the Python dispatcher, which then finds a Meta kernel and sends the autograd key to
    the not-implemented fallback instead of the composite: the joint graph of a meta program
    drops those ops' backward (a causal-LM's loss gradient). On a device, or for fake tensors of
    one, the composite runs and is differentiated; while the joint graph is traced, so it is here.
    """
    from torch._decomp import global_decomposition_table

    meta = torch._C.DispatchKey.Meta
    ops = {op for table in global_decomposition_table.values() for op in table if isinstance(op, torch._ops.OpOverload)}
    removed = {
        op: op.py_kernels.pop(meta)
        for op in ops
        if meta in op.py_kernels and torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    }
    for op in removed:
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, kernel in removed.items():
            op.py_kernels[meta] = kernel
            op._dispatch_cache.clear()


def compile_model(model: torch.nn.Module, *, device: str) -> CompiledGraphs | None:
    """``model.compile()`` in place, so names and hooks stay: inductor on a real device, the
    partitioned graphs interpreted on meta (what they ran is returned)."""
    if device != "meta":
        model.compile(backend=_inductor)
        return None
    graphs = CompiledGraphs()
    model.compile(backend=graphs.backend)
    return graphs


def _inductor(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """``backend="inductor"`` itself."""
    from torch._inductor.compile_fx import compile_fx

    with quiet_joint_trace():
        return cast(Callable[..., Any], compile_fx(gm, example_inputs))


def _interpreted(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor], *, runs: set[int]) -> Callable[..., Any]:
    """Run ``gm`` node by node with the boxed convention: the argument list is emptied, so an
    input (a saved tensor, in backward) dies at its last use, as in inductor's compiled call."""

    def run(args: list[Any]) -> Any:
        runs.add(id(gm))
        return torch.fx.Interpreter(gm, garbage_collect_values=True).boxed_run(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
