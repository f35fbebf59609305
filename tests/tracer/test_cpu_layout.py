"""Target cpu: the strides of meta outputs equal those of the same ops run on real CPU tensors."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from profiled import allocation_trace
from torch.profiler import ProfilerActivity, profile

from vramsim.tracer.kernels.cpu_layout import cpu_group_norm, cpu_output_layouts
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.tracer.scope import ModuleScope
from vramsim.workload.targets import resolve_target

aten = torch.ops.aten


def _layouts(device: str) -> dict[str, torch.Tensor]:
    """NCHW, channels-last, a channels-last view whose size-1 batch dim has an odd stride (as a
    transposed attention output reshaped to an image gives), and a broadcast bias."""
    odd = torch.empty(1, 64, 64, device=device).transpose(1, 2).reshape(1, 64, 8, 8)
    return {
        "nchw": torch.empty(2, 16, 4, 4, device=device),
        "cl": torch.empty(2, 16, 4, 4, device=device).to(memory_format=torch.channels_last),
        "odd": odd,
        "odd_nchw": torch.empty(1, 64, 8, 8, device=device),
        "bias": torch.empty(1, 16, 1, 1, device=device),
    }


_POINTWISE: list[tuple[str, Callable[[dict[str, torch.Tensor]], tuple]]] = [
    ("div-scalar-odd", lambda t: (aten.div.Tensor, (t["odd"], 2.0))),
    ("silu-odd", lambda t: (aten.silu.default, (t["odd"],))),
    ("add-cl-nchw", lambda t: (aten.add.Tensor, (t["cl"], t["nchw"]))),
    ("add-nchw-cl", lambda t: (aten.add.Tensor, (t["nchw"], t["cl"]))),
    ("add-odd-nchw", lambda t: (aten.add.Tensor, (t["odd"], t["odd_nchw"]))),
    ("add-cl-bias", lambda t: (aten.add.Tensor, (t["cl"], t["bias"]))),
    ("add-bias-cl", lambda t: (aten.add.Tensor, (t["bias"], t["cl"]))),
    ("mul-scalar-overload-odd", lambda t: (aten.mul.Scalar, (t["odd"], 0.5))),
    ("where-cl", lambda t: (aten.where.self, (t["nchw"] > 0, t["cl"], t["nchw"]))),
    ("silu-backward-mixed", lambda t: (aten.silu_backward.default, (t["nchw"], t["cl"]))),
    ("empty-like-odd", lambda t: (aten.empty_like.default, (t["odd"],))),
]


@pytest.mark.parametrize("case", [c for _, c in _POINTWISE], ids=[name for name, _ in _POINTWISE])
def test_pointwise_output_strides_are_the_cpu_kernels(case: Callable[[dict[str, torch.Tensor]], tuple]) -> None:
    """TensorIterator's layout (and empty_like's) on meta equals the real CPU result."""
    func, cpu_args = case(_layouts("cpu"))
    _, meta_args = case(_layouts("meta"))
    expected = func(*cpu_args).stride()
    assert cpu_output_layouts(func, meta_args, {}, func(*meta_args)).stride() == expected


def test_the_meta_kernel_alone_differs_where_the_rule_matters() -> None:
    """Without the rule, meta gives a scalar division of the odd view other strides than the CPU."""
    assert (_layouts("meta")["odd"] / 2.0).stride() != (_layouts("cpu")["odd"] / 2.0).stride()


def _group_norm_run(device: str, norm: Callable[..., torch.Tensor]) -> tuple[tuple[int, ...], ...]:
    x = torch.empty(1, 64, 8, 8, device=device).to(memory_format=torch.channels_last).requires_grad_()
    w = torch.ones(64, device=device, requires_grad=True)
    b = torch.zeros(64, device=device, requires_grad=True)
    y = norm(x, 8, w, b)
    grad = torch.empty_like(y)
    (gx,) = torch.autograd.grad(y, (x,), grad)
    return y.stride(), gx.stride()


def test_group_norm_keeps_channels_last_as_on_cpu() -> None:
    """group_norm.cpp keeps a channels-last input on CPU (meta makes it contiguous); so does its derivative."""
    expected = _group_norm_run("cpu", F.group_norm)
    with KernelEmulation(resolve_target("cpu").rules):
        assert _group_norm_run("meta", cpu_group_norm) == expected
        assert _group_norm_run("meta", F.group_norm) == expected  # routed by KernelRules.functions
    assert _group_norm_run("meta", F.group_norm) != expected


@pytest.mark.parametrize("batch", [1, 2], ids=["slow2d", "mkldnn"])
def test_convolution_output_strides_are_the_cpu_kernels(batch: int) -> None:
    """Convolution.cpp determine_backend_memory_format: channels-last input, channels-last outputs."""

    def run(device: str) -> list[tuple[int, ...]]:
        x = torch.empty(batch, 16, 8, 8, device=device).to(memory_format=torch.channels_last)
        w = torch.empty(8, 16, 3, 3, device=device)
        args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        out = aten.convolution.default(*args)
        grads = aten.convolution_backward.default(torch.empty_like(out), x, w, [8], *args[3:], [True, True, True])
        if device == "meta":
            out = cpu_output_layouts(aten.convolution.default, args, {}, out)
            backward_args = (torch.empty_like(out), x, w, [8], *args[3:], [True, True, True])
            grads = cpu_output_layouts(aten.convolution_backward.default, backward_args, {}, grads)
        return [out.stride(), grads[0].stride(), grads[1].stride()]

    assert run("meta") == run("cpu")


# -- the module scope leaves the traced program's memory as it is -----------------------------


class _TwoInputs(torch.nn.Module):
    """A block whose two inputs both need gradients, as a UNet resnet's (hidden states, time
    embedding); the embedding's gradient arrives first and, if buffered, blocks its in-place
    accumulation."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 1024)
        self.b = torch.nn.Linear(1024, 64)
        self.c = torch.nn.Linear(2048, 64)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x))) + self.c(t)


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(64, 64)
        self.emb = torch.nn.Linear(64, 2048)
        self.blocks = torch.nn.ModuleList(_TwoInputs() for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, t = self.inp(x), self.emb(x)
        for block in self.blocks:
            h = block(h, t)
        return h


def _backward_peak(with_scope: bool) -> int:
    torch.manual_seed(0)
    net, x = _Net(), torch.randn(256, 64)
    scope = ModuleScope({"": net}) if with_scope else None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if scope is not None:
            with scope:
                net(x).sum().backward()
        else:
            net(x).sum().backward()
    return allocation_trace(prof)[0]


def test_module_scope_holds_no_gradients() -> None:
    """ModTracker's "all"-mode input hooks buffer gradients; the scope must not change the peak."""
    assert _backward_peak(with_scope=True) == _backward_peak(with_scope=False)
