"""Reductions that accumulate in another dtype copy their input first: the rule against the real
CPU kernels (torch.profiler), and the CUDA exception read from ReduceOpsUtils.h."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from profiled import transient_bytes

from vramsim.tracer.kernels.reductions import reduction_copies

aten = torch.ops.aten
N = 1000

CASES: list[tuple[str, torch.dtype, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("bool mask sum over a dim", torch.bool, lambda x: aten.sum.dim_IntList(x, [-1])),
    ("bool mask sum of all", torch.bool, lambda x: aten.sum.default(x)),
    ("int32 sum (int64 out)", torch.int32, lambda x: aten.sum.dim_IntList(x, [-1])),
    ("float sum in float64", torch.float32, lambda x: aten.sum.dim_IntList(x, [-1], dtype=torch.float64)),
    ("float nansum in float64", torch.float32, lambda x: aten.nansum.default(x, [-1], dtype=torch.float64)),
    ("bf16 sum in float", torch.bfloat16, lambda x: aten.sum.dim_IntList(x, [-1], dtype=torch.float32)),
    ("bf16 sum, same dtype", torch.bfloat16, lambda x: aten.sum.dim_IntList(x, [-1])),
    ("bf16 mean over a dim", torch.bfloat16, lambda x: aten.mean.dim(x, [-1])),
    ("float mean, same dtype", torch.float32, lambda x: aten.mean.dim(x, [0])),
]


def _rule_bytes(rule: Callable[..., list[int]], op: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int:
    seen: list[int] = []

    class Spy(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.extend(rule(func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    with Spy():
        op(x.to("meta"))
    return sum(seen)


@pytest.mark.parametrize(("name", "dtype", "op"), CASES, ids=[c[0] for c in CASES])
def test_cpu_rule_equals_the_kernels_copy(name: str, dtype: torch.dtype, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
    x = torch.ones(N, N, dtype=dtype)
    measured = transient_bytes(lambda: op(x))
    predicted = _rule_bytes(reduction_copies(cuda=False), op, x)
    assert abs(predicted - measured) <= 16, f"{name}: rule {predicted:,} B, kernel {measured:,} B"


def test_cuda_reads_half_inputs_of_a_float_sum_as_they_are() -> None:
    """``gpu_lowp_to_f32``: bf16 -> float sums and bf16 means copy nothing on CUDA; a bool mask still does."""
    rule = reduction_copies(cuda=True)
    half = torch.ones(N, N, dtype=torch.bfloat16)
    assert _rule_bytes(rule, lambda x: aten.sum.dim_IntList(x, [-1], dtype=torch.float32), half) == 0
    assert _rule_bytes(rule, lambda x: aten.mean.dim(x, [-1]), half) == 0
    mask = torch.ones(N, N, dtype=torch.bool)
    assert _rule_bytes(rule, lambda x: aten.sum.dim_IntList(x, [-1]), mask) == N * N * 8
