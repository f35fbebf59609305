"""The tracer's prediction against the real CPU run of the very same workload.

Each case builds a tiny real model, predicts its steady-state peak with ``vramsim.simulate``
(meta device, CPU kernels emulated) and measures it with ``vramsim.validation.measure.measure_cpu``
(the same workload code run for real under ``torch.profiler``; the peak of c10's total
allocated bytes in the last step). They must agree within 0.5% unless a case says otherwise,
with the reason next to it in ``ground_truth_cases.py``.
"""

from __future__ import annotations

import pytest
from ground_truth_cases import CASES, Case
from profiled import transient_bytes

from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.validation.measure import measure_cpu


def test_the_suite_covers_what_it_claims() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)) >= 32
    families = {case.id.split("-")[0] for case in CASES}
    assert len(families) >= 10
    tasks = {case.options["task"] for case in CASES}
    assert tasks == {"train", "forward", "generate"}


def _unmodelled_here(kernels: tuple[str, ...]) -> list[str]:
    """The oneDNN kernels among ``kernels`` whose buffers are not modelled on this CPU's ISA."""
    from vramsim.tracer.kernels.cpu_kernels import onednn_brgemm_isa
    from vramsim.tracer.kernels.onednn_conv import onednn_conv_isa

    modelled = {"conv": onednn_conv_isa() is not None, "bf16-matmul": onednn_brgemm_isa() is not None}
    return [kernel for kernel in kernels if not modelled[kernel]]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_prediction_matches_the_real_cpu_run(case: Case) -> None:
    unmodelled = _unmodelled_here(case.onednn)
    if unmodelled:
        pytest.skip(f"oneDNN {', '.join(unmodelled)} buffers are modelled for AVX-512 CPUs only, not this one's ISA")
    predicted = simulate(case.source(), device="cpu", **case.options).peak_bytes
    measured = measure_cpu(case.source(), SimulationConfig(device="cpu", **case.options)).peak_bytes
    error = predicted / measured - 1
    assert abs(error) <= case.tolerance, (
        f"{case.id}: predicted {predicted:,} B, measured {measured:,} B ({error:+.3%}, tolerance {case.tolerance:.1%})"
    )


# -- the kernel rules alone, against the real kernels ------------------------------------------


_MM_SHAPES = [
    # (M, N, K, A transposed, B transposed, bias): linear forward/backward layouts and edge cases
    (64, 128, 64, False, True, False), (64, 64, 128, False, False, False), (128, 64, 64, True, False, False),
    (1, 1024, 2048, False, False, False), (1024, 64, 1, True, False, False), (1, 16, 2048, True, True, False),
    (300, 1000, 768, False, True, True), (2048, 256, 4096, False, True, False), (33, 7, 1100, True, True, True),
    (16, 16, 16, False, False, False), (2, 64, 128, False, True, True), (512, 32, 2048, True, False, False),
]  # fmt: skip


_MM_IDS = ["x".join(map(str, s[:3])) + "-" + "".join("TF"[not f] for f in s[3:]) for s in _MM_SHAPES]


@pytest.mark.parametrize("shape", _MM_SHAPES, ids=_MM_IDS)
@pytest.mark.parametrize("threads", [1, 2])
def test_bf16_matmul_scratchpad_is_the_kernels(shape: tuple[int, int, int, bool, bool, bool], threads: int) -> None:
    import torch

    from vramsim.tracer.kernels.cpu_kernels import matmul_workspaces, onednn_brgemm_isa

    if onednn_brgemm_isa() is None:
        pytest.skip("the oneDNN bf16 matmul scratchpad is modelled for AVX-512 CPUs without AMX only")
    m, n, k, a_t, b_t, bias = shape
    a = torch.randn(k, m, dtype=torch.bfloat16).t() if a_t else torch.randn(m, k, dtype=torch.bfloat16)
    b = torch.randn(n, k, dtype=torch.bfloat16).t() if b_t else torch.randn(k, n, dtype=torch.bfloat16)
    c = torch.randn(n, dtype=torch.bfloat16)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if bias:
            real = transient_bytes(lambda: torch.addmm(c, a, b))
            predicted = matmul_workspaces(torch.ops.aten.addmm.default, (c, a, b), {})
        else:
            real = transient_bytes(lambda: torch.mm(a, b))
            predicted = matmul_workspaces(torch.ops.aten.mm.default, (a, b), {})
    finally:
        torch.set_num_threads(before)
    assert sum(predicted) == real


_CONVS = [
    (1, 64, 64, 16, 3, 1, 1), (1, 32, 16, 8, 3, 2, 1), (1, 4, 32, 8, 1, 1, 0), (1, 8, 16, 24, 3, 1, 0), (1, 16, 8, 12, 3, 1, 2),
]  # fmt: skip
"""Single-sample convolutions small enough for Convolution.cpp to pick the Slow2d backend."""


@pytest.mark.parametrize("conv", _CONVS, ids=["n{}c{}o{}h{}k{}s{}p{}".format(*c) for c in _CONVS])
def test_slow_conv2d_columns_are_the_kernels(conv: tuple[int, ...]) -> None:
    import torch

    from vramsim.tracer.kernels.cpu_kernels import conv2d_workspaces

    n, c, o, h, k, s, p = conv
    x = torch.randn(n, c, h, h, requires_grad=True)
    w = torch.randn(o, c, k, k, requires_grad=True)
    args = (x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1)
    predicted = conv2d_workspaces(torch.ops.aten.convolution.default, args, {})
    y = torch.nn.functional.conv2d(x, w, None, stride=s, padding=p)
    assert sum(predicted) == transient_bytes(lambda: torch.nn.functional.conv2d(x, w, None, stride=s, padding=p))
    grad = torch.randn_like(y)
    backward = (grad, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, True, False])
    expected = sum(conv2d_workspaces(torch.ops.aten.convolution_backward.default, backward, {}))
    assert expected == transient_bytes(lambda: torch.autograd.grad(y, (x, w), grad, retain_graph=True))


_CONVS_3D = [(1, 16, 16, 3, 32, 3, 1, 1), (1, 8, 4, 5, 12, 3, 2, 0), (1, 6, 6, 4, 10, 3, 1, 2)]
"""Single-sample 3-D convolutions (a causal video VAE's) that Convolution.cpp sends to Slow3d."""


@pytest.mark.parametrize("conv", _CONVS_3D, ids=["n{}c{}o{}t{}h{}k{}s{}p{}".format(*c) for c in _CONVS_3D])
def test_slow_conv3d_columns_are_the_kernels(conv: tuple[int, ...]) -> None:
    import torch

    from vramsim.tracer.kernels.cpu_kernels import conv2d_workspaces

    n, c, o, t, h, k, s, p = conv
    x = torch.randn(n, c, t, h, h, requires_grad=True)
    w = torch.randn(o, c, k, k, k, requires_grad=True)
    args = (x, w, None, [s] * 3, [p] * 3, [1] * 3, False, [0] * 3, 1)
    predicted = conv2d_workspaces(torch.ops.aten.convolution.default, args, {})
    y = torch.nn.functional.conv3d(x, w, None, stride=s, padding=p)
    assert sum(predicted) == transient_bytes(lambda: torch.nn.functional.conv3d(x, w, None, stride=s, padding=p)) > 0
    grad = torch.randn_like(y)
    backward = (grad, x, w, None, [s] * 3, [p] * 3, [1] * 3, False, [0] * 3, 1, [True, True, False])
    expected = sum(conv2d_workspaces(torch.ops.aten.convolution_backward.default, backward, {}))
    assert expected == transient_bytes(lambda: torch.autograd.grad(y, (x, w), grad, retain_graph=True))
