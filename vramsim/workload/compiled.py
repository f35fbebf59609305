"""``--compile``: the graphs AOTAutograd's partitioner chooses, run as inductor's generated wrapper runs them.

``torch.compile`` with inductor runs a forward graph that returns the tensors backward needs and
a backward graph that reads them; which intermediates are saved and which are recomputed is
decided by inductor's ``partition_fn`` (its joint-graph passes, then
``min_cut_rematerialization_partition``, torch/_functorch/partitioners.py) on the joint graph, after
inductor's decompositions; a checkpointed region is a higher-order op whose ops the partitioner
recomputes. On meta the same dynamo capture, decompositions and partitioner run
(``estimators.assumptions.COMPILE_MODELLED``); each graph is then lowered by inductor itself and
runs as its generated wrapper does (``inductor_plan``, ``estimators.assumptions.COMPILE_FUSION``):
the buffers, their frees and their reuse are inductor's. Code between graphs (graph breaks) runs
eagerly.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from unittest import mock

import torch

from vramsim.workload.inductor_plan import planned_call
from vramsim.workload.quiet import quiet_joint_trace

__all__ = ["CompiledGraphs", "compile_model"]


@dataclass(slots=True)
class CompiledGraphs:
    """The partitioned graphs a compiled model ran while traced, counted for the report's note."""

    forward: set[int] = field(default_factory=set)
    """Forward (and inference) graphs run, by ``id`` of their GraphModule."""
    backward: set[int] = field(default_factory=set)
    fusion: bool = True
    """Model inductor's fused and in-place buffers; without, every op's output is allocated (the
    partitioned graphs run eagerly, which tests measure on the CPU)."""

    def describe(self) -> str:
        return f"{len(self.forward)} forward and {len(self.backward)} backward graph(s) ran"

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
        """Inductor's path up to its code generation: its decompositions and its partitioner."""
        from torch._dynamo.backends.common import aot_autograd
        from torch._inductor.compile_fx import select_decomp_table

        with quiet_joint_trace(), _composites_differentiable_on_meta():
            return aot_autograd(  # type: ignore[no-any-return]
                fw_compiler=functools.partial(_interpreted, runs=self.forward, fusion=self.fusion, graph="forward"),
                bw_compiler=functools.partial(_interpreted, runs=self.backward, fusion=self.fusion, graph="backward"),
                inference_compiler=functools.partial(_interpreted, runs=self.forward, fusion=self.fusion, graph="inference"),
                decompositions=select_decomp_table(),
                partition_fn=_joint_passes_then_partition,
            )(gm, example_inputs)


def _joint_passes_then_partition(gm: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
    """Inductor's own ``partition_fn``: its joint-graph passes (uniform constants folded, pattern
    rewrites such as a scatter into a constant made pointwise), then the min-cut partitioner."""
    from torch._inductor import pattern_matcher
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.fx_passes import joint_graph

    unsupported = pattern_matcher.fallback_node_due_to_unsupported_type
    with (
        mock.patch.object(joint_graph, "remove_no_ops", _outputs_kept(joint_graph.remove_no_ops)),
        mock.patch.object(pattern_matcher, "fallback_node_due_to_unsupported_type", _meta_supported(unsupported)),
    ):
        return partition_fn(gm, joint_inputs, **kwargs)


def _meta_supported(unsupported: Callable[..., bool]) -> Callable[..., bool]:
    """The pattern matcher skips nodes on devices inductor cannot lower, meta among them; a meta
    program's nodes stand for the target's, so they are matched as a device's would be."""

    def check(node: torch.fx.Node, *args: Any, **kwargs: Any) -> bool:
        values = [n.meta.get("val") for n in (node, *node.all_input_nodes)]
        on_meta = all(not isinstance(v, torch.Tensor) or v.device.type == "meta" for v in values)
        return False if on_meta else unsupported(node, *args, **kwargs)

    return check


def _outputs_kept(remove_no_ops: Callable[..., None]) -> Callable[..., None]:
    """``remove_no_ops`` also swaps a graph's meta outputs for ``empty_strided`` (a device graph's meta
    values hold nothing), which on a meta program would replace real values, their other readers
    included: the outputs' values are hidden from that step and put back after."""

    def run(gm: torch.fx.GraphModule, *args: Any) -> None:
        outputs = [n for out in gm.graph.find_nodes(op="output") for n in out.all_input_nodes]
        kept = {n: n.meta.pop("val") for n in outputs if "val" in n.meta}
        try:
            remove_no_ops(gm, *args)
        finally:
            for node, value in kept.items():
                node.meta["val"] = value

    return run


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
    partitioned graphs interpreted on meta (what they ran is returned). Dynamo's caches are reset first:
    each program compiles as in a fresh process (a new model of a class compiled before would otherwise
    add guarded entries until dynamo's recompile limit, past which it silently runs eagerly)."""
    torch._dynamo.reset()
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


def _interpreted(
    gm: torch.fx.GraphModule,
    example_inputs: list[torch.Tensor],
    *,
    runs: set[int],
    fusion: bool,
    graph: Literal["forward", "backward", "inference"],
) -> Callable[..., Any]:
    """The graph as inductor would run it: its generated wrapper (``inductor_plan``), or without
    ``fusion`` node by node, each value freed after its last use. Both take the boxed convention: the
    argument list is emptied, so an input (a saved tensor, in backward) dies at its last use."""
    if fusion:
        call = planned_call(gm, example_inputs, is_backward=graph == "backward", is_inference=graph == "inference")
    else:
        call = torch.fx.Interpreter(gm, garbage_collect_values=True).boxed_run

    def run(args: list[Any]) -> Any:
        runs.add(id(gm))
        return call(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
