"""Emulated autocast on meta tensors follows autocast_mode.cpp: op lists, set-dtype ops, weight-cast cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vramsim.tracer.categories import Phase
from vramsim.tracer.mode import MemoryTracer
from vramsim.tracer.scope import ModuleScope
from vramsim.workload.targets import resolve_target


def meta(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    return torch.empty(*shape, device="meta", dtype=dtype, requires_grad=grad)


def test_cuda_lists() -> None:
    emulation = resolve_target("h100").emulation()
    x, w = meta(4, 8), meta(16, 8, grad=True)
    with emulation, emulation.autocast(torch.bfloat16):
        assert F.linear(x, w).dtype == torch.bfloat16  # lower precision list
        assert F.layer_norm(meta(4, 8, dtype=torch.bfloat16), (8,)).dtype == torch.float32  # fp32 list
        assert torch.softmax(meta(4, 8, dtype=torch.bfloat16), -1).dtype == torch.float32  # dtype=float32 set
        assert torch.cat([meta(2, dtype=torch.bfloat16), meta(2)]).dtype == torch.float32  # promote
        assert (x * 2).dtype == torch.float32  # not listed: untouched
    assert F.linear(x, w).dtype == torch.float32  # outside autocast


def test_cpu_lists_differ_from_cuda() -> None:
    """CPU autocast leaves layer_norm and softmax alone (they are on CUDA's lists, not CPU's)."""
    emulation = resolve_target("cpu").emulation()
    with emulation, emulation.autocast(torch.bfloat16):
        assert F.linear(meta(4, 8), meta(16, 8)).dtype == torch.bfloat16
        assert F.layer_norm(meta(4, 8, dtype=torch.bfloat16), (8,)).dtype == torch.bfloat16
        assert torch.softmax(meta(4, 8, dtype=torch.bfloat16), -1).dtype == torch.bfloat16


def test_weight_casts_are_cached_until_autocast_exits() -> None:
    """A leaf weight used twice is cast once; the cached copy lives until the outermost exit."""
    emulation = resolve_target("h100").emulation()
    weight = meta(64, 64, grad=True)
    scope = ModuleScope()
    tracer = MemoryTracer(scope, devices={"meta"})
    with scope, tracer, emulation:
        scope.phase = Phase.FORWARD
        with emulation.autocast(torch.bfloat16):
            with torch.no_grad():
                F.linear(meta(2, 64), weight)
                F.linear(meta(2, 64), weight)
            casts = [s for s in tracer.trace.storages if s.op == "aten._to_copy" and s.shape == (64, 64)]
            assert len(casts) == 1 and casts[0].free_clock is None
    assert casts[0].free_clock is not None
