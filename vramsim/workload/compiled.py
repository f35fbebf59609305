"""``--compile``: the graphs AOTAutograd's min-cut partitioner chooses, run op by op under the tracer.

``torch.compile`` with inductor runs a forward graph that returns the tensors backward needs and
a backward graph that reads them; which intermediates are saved and which are recomputed is
decided by ``min_cut_rematerialization_partition`` (torch/_functorch/partitioners.py) on the
joint graph, after inductor's decompositions. On meta the same dynamo capture, decompositions
and partitioner run (``estimators.assumptions.COMPILE_MODELLED``); inductor's lowering and code
generation are not run: each graph is interpreted node by node, every value freed after its
last use (inductor's wrapper deletes each buffer there), so the tracer sees the saved set the
partitioner chose. Which buffers inductor's kernels allocate is modelled from inductor's own
lowering tables (``_inlined_nodes``, ``estimators.assumptions.COMPILE_FUSION``): values computed
inside the kernels that read them allocate nothing, and a pointwise kernel writes into a buffer
it reads for the last time. Code between graphs (graph breaks) runs eagerly.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as _dispatch_modes

from vramsim.tracer.mode import MemoryTracer
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
        from torch._functorch.partitioners import min_cut_rematerialization_partition
        from torch._inductor.compile_fx import select_decomp_table

        with quiet_joint_trace(), _composites_differentiable_on_meta():
            return aot_autograd(  # type: ignore[no-any-return]
                fw_compiler=functools.partial(_interpreted, runs=self.forward, fusion=self.fusion),
                bw_compiler=functools.partial(_interpreted, runs=self.backward, fusion=self.fusion),
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


def _interpreted(
    gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor], *, runs: set[int], fusion: bool
) -> Callable[..., Any]:
    """Run ``gm`` node by node with the boxed convention: the argument list is emptied, so an
    input (a saved tensor, in backward) dies at its last use, as in inductor's compiled call."""
    inlined = _inlined_nodes(gm.graph) if fusion else frozenset()

    def run(args: list[Any]) -> Any:
        runs.add(id(gm))
        interpreter = _FusingInterpreter(gm, inlined) if fusion else torch.fx.Interpreter(gm, garbage_collect_values=True)
        return interpreter.boxed_run(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


_CONSTANTS = frozenset({torch.ops.aten.full.default, torch.ops.aten.scalar_tensor.default})
"""Factories inductor lowers to constants computed inside the kernels that read them."""


def _inlined_nodes(graph: torch.fx.Graph) -> frozenset[torch.fx.Node]:
    """Values inductor computes inside the kernels that read them, never allocating them (an
    assumption, ``estimators.assumptions.COMPILE_FUSION``): pointwise ops and constants whose
    every reader inductor lowers to a loop body (``lowerings``; not an extern kernel such as a
    matmul, which ``needs_realized_inputs``, nor a fallback), and views of such values."""
    from torch._inductor.lowering import fallbacks, lowerings, needs_realized_inputs

    def loop_body(node: torch.fx.Node) -> bool:
        target = node.target
        return (
            node.op == "call_function"
            and target in lowerings
            and target not in fallbacks
            and target not in needs_realized_inputs
            and getattr(target, "overloadpacket", None) not in needs_realized_inputs
        )

    inlined: set[torch.fx.Node] = set()
    for node in reversed(graph.nodes):  # readers first
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        scatter_on_constant = (  # inductor's post-grad pattern scatter_upon_const_tensor makes it pointwise
            node.target is torch.ops.aten.scatter.value
            and isinstance(node.args[0], torch.fx.Node)
            and node.args[0].target in _CONSTANTS
        )
        pointwise = torch.Tag.pointwise in node.target.tags or node.target in _CONSTANTS or scatter_on_constant
        fusible = pointwise or node.target.is_view
        readers_inline = all(loop_body(user) and (user in inlined or not user.target.is_view) for user in node.users)
        if fusible and node.users and readers_inline:
            inlined.add(node)
    return frozenset(inlined)


class _FusingInterpreter(torch.fx.Interpreter):
    """Runs inlined values outside the tracer (nothing allocated), and a kernel that reads any as
    one fused kernel: its output recorded, its loads the buffers the inlined values came from
    (kept alive until that kernel ends). A pointwise kernel reading a buffer for the last time
    writes its output there. Outside the tracer (a real run) the graph runs as it is."""

    def __init__(self, gm: torch.fx.GraphModule, inlined: frozenset[torch.fx.Node]) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self._inlined = inlined
        self._sources: dict[torch.fx.Node, tuple[torch.Tensor, ...]] = {}
        """An inlined value -> the allocated buffers it is computed from, kept alive while it is."""
        self._tracer = next((m for m in _dispatch_modes() if isinstance(m, MemoryTracer)), None)

    def run_node(self, n: torch.fx.Node) -> Any:
        reads_inlined = any(arg in self._inlined for arg in n.all_input_nodes)
        victim = self._inplace_victim(n)
        if self._tracer is None or not (n in self._inlined or reads_inlined or victim is not None):
            return super().run_node(n)
        loads = tuple(t for arg in n.all_input_nodes for t in self._loads(arg))
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        with _disable_current_modes():
            out = getattr(self, n.op)(n.target, args, kwargs)
        if n in self._inlined:
            self._sources[n] = loads
        else:
            if victim is not None and _same_layout(victim, out):
                out = victim  # written in place: the values are not modelled, the buffer is
            self._tracer.record_kernel(f"fused:{getattr(n.target, '__name__', n.target)}", loads, out)
        for dead in self.user_to_last_uses.get(n, ()):
            self._sources.pop(dead, None)  # read for the last time: its buffers may go, as the kernel ends
        return out

    def _inplace_victim(self, n: torch.fx.Node) -> torch.Tensor | None:
        """A buffer this pointwise kernel reads for the last time, which inductor's scheduler lets it
        write its output into (``decide_inplace_update``): one the graph made, or a saved tensor
        backward received (AOTAutograd donates them, ``donated_buffer``); not a view."""
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload) or n in self._inlined:
            return None
        if torch.Tag.pointwise not in n.target.tags:
            return None
        for arg in self.user_to_last_uses.get(n, ()):
            value = self.env.get(arg)
            if not _donated(arg) or arg in self._inlined or not isinstance(value, torch.Tensor):
                continue
            if value._base is None and value.untyped_storage().nbytes() == value.numel() * value.element_size():
                return value
        return None

    def _loads(self, node: torch.fx.Node) -> tuple[torch.Tensor, ...]:
        if node in self._inlined:
            return self._sources[node]
        value = self.env.get(node)
        return (value,) if isinstance(value, torch.Tensor) else ()


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype


def _donated(node: torch.fx.Node) -> bool:
    """A value the graph may overwrite: its own, or a saved activation (AOTAutograd names a
    backward graph's parameters and inputs ``primals_*``, the incoming gradients ``tangents_*``)."""
    return node.op != "placeholder" or not node.name.startswith(("primals", "tangents", "arg"))
