"""Inductor's own memory plan for a partitioned graph: its lowering, scheduler and wrapper, run on fake tensors.

``torch.compile`` with inductor lowers each graph AOTAutograd hands it (``compile_fx``): post-grad passes,
``GraphLowering`` (which values are realised as buffers, which are computed inside the kernels that read
them), the scheduler (fusion, in-place updates, order) and the Python wrapper's memory planning (each
buffer's ``empty_strided``, ``del`` after its last use, a freed buffer reused for a later one of the same
size). Those steps are run here as ``compile_fx`` runs them, on fake CPU tensors of the meta graph's
shapes, and stop at the generated wrapper: its kernels are never compiled (no C++ compiler is needed for
them). The wrapper's ``call`` then runs on meta under the tracer, each ``empty_strided`` a meta
allocation, each ``del`` a free, extern kernels (matmuls, attention fallbacks) the traced ops they call,
and each generated kernel recorded as one fused kernel reading its arguments and allocating nothing.

What this approximates is named in ``estimators.assumptions.COMPILE_FUSION``: the plan is inductor's CPU
(C++) backend's for every target, since its GPU (Triton) backend needs Triton and a device to lower.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as _dispatch_modes

from vramsim.tracer.mode import MemoryTracer

__all__ = ["planned_call"]

_LOWERED = torch.device("cpu")
"""The device inductor lowers for: its C++ backend, which needs no device or Triton to generate code."""


def planned_call(
    gm: torch.fx.GraphModule, example_inputs: list[Any], *, is_backward: bool, is_inference: bool
) -> Callable[[list[Any]], Any]:
    """Inductor's wrapper ``call`` for ``gm`` (boxed: it empties its argument list), to run on meta."""
    source = _wrapper_source(gm, example_inputs, is_backward=is_backward, is_inference=is_inference)
    scope: dict[str, Any] = {}
    with mock.patch("torch._inductor.async_compile.AsyncCompile", _Kernels):
        exec(compile(source, f"<inductor wrapper of {gm.__class__.__name__}>", "exec"), scope)
    scope.update(_ON_META)
    call: Callable[[list[Any]], Any] = scope["call"]
    return call


def _wrapper_source(gm: torch.fx.GraphModule, example_inputs: list[Any], *, is_backward: bool, is_inference: bool) -> str:
    """``compile_fx``'s steps from the post-grad passes to the wrapper's code, on fake tensors."""
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import _recursive_post_grad_passes, fake_tensor_prop, view_to_reshape
    from torch._inductor.debug import DebugContext
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode

    with _disable_current_modes(), DebugContext(), torch.no_grad():
        lowered = _on_lowered_device(gm)
        with detect_fake_mode(example_inputs) or FakeTensorMode():  # AOTAutograd's own, while it compiles
            inputs = [
                torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=_LOWERED) if isinstance(t, torch.Tensor) else t
                for t in example_inputs
            ]
        view_to_reshape(lowered)
        fake_mode = fake_tensor_prop(lowered, inputs)
        with V.set_fake_mode(fake_mode):
            _recursive_post_grad_passes(lowered, is_inference=is_inference)
            graph = GraphLowering(lowered, example_inputs=inputs, is_inference=is_inference, is_backward=is_backward)
            with V.set_graph_handler(graph), V.set_extern_kernel_nodes([]):
                graph.run(*inputs)
                wrapper, _ = graph.codegen()
    return str(wrapper.value)


def _on_lowered_device(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose factories make tensors on the lowered device, not meta."""
    lowered = copy.deepcopy(gm)

    def move(value: Any) -> Any:
        return _LOWERED if isinstance(value, torch.device) and value.type == "meta" else value

    for node in lowered.graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, move)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, move)
        node.meta.pop("val", None)  # re-propagated on the lowered device
        node.meta.pop("tensor_meta", None)
    lowered.recompile()
    return lowered


class _Kernels:
    """``AsyncCompile`` for a wrapper that runs on meta: each generated kernel is a recorded no-op."""

    def __getattr__(self, backend: str) -> Callable[..., Callable[..., None]]:
        def kernel(*_: Any, **__: Any) -> Callable[..., None]:
            return _fused_kernel(backend)

        return kernel

    def wait(self, scope: dict[str, Any]) -> None:
        pass


def _fused_kernel(backend: str) -> Callable[..., None]:
    """One generated kernel: it writes into buffers the wrapper allocated, so it allocates nothing; the
    tracer records it reading the tensors it is given."""

    def run(*args: Any) -> None:
        tracer = next((m for m in _dispatch_modes() if isinstance(m, MemoryTracer)), None)
        if tracer is not None:
            tracer.record_kernel(f"inductor:{backend}", [a for a in args if isinstance(a, torch.Tensor)], None)

    return run


def _empty_strided(size: Any, stride: Any, dtype: torch.dtype, *_: Any, **__: Any) -> torch.Tensor:
    return torch.empty_strided(size, stride, dtype=dtype, device="meta")


def _reinterpret(tensor: torch.Tensor, size: Any, stride: Any, offset: int) -> torch.Tensor:
    """``_reinterpret_tensor``: a view of the same storage, ``offset`` elements further."""
    return tensor.as_strided(size, stride, tensor.storage_offset() + offset)


def _unchecked(*_: Any, **__: Any) -> None:
    """The wrapper's size, stride and alignment asserts: meta tensors have no addresses to check."""


def _meta_device(*_: Any, **__: Any) -> torch.device:
    return torch.device("meta")


_ON_META: dict[str, Any] = {
    "empty_strided_cpu": _empty_strided,
    "empty_strided": _empty_strided,
    "reinterpret_tensor": _reinterpret,
    "assert_size_stride": _unchecked,
    "assert_alignment": _unchecked,
    "device": _meta_device,
}
"""The wrapper's allocators and device made meta's; everything else (extern kernels, fallbacks) runs as is."""
