"""Norms and cross-entropy on CUDA targets: the fused RMSNorm kernel, autocast inside the
cross-entropy composite, and the statistics dtypes of layer/group norm, against meta execution."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from vramsim.tracer.categories import Phase
from vramsim.tracer.mode import MemoryTracer
from vramsim.tracer.records import BEFORE_TRACE, StorageRecord
from vramsim.tracer.scope import ModuleScope
from vramsim.workload.targets import resolve_target

ROWS, HIDDEN = 128, 256


def live_after_forward(target: str, run: Callable[[], torch.Tensor], *, autocast: bool) -> list[StorageRecord]:
    """Storages the forward made and left alive (output and what autograd saved); runs backward too."""
    emulation = resolve_target(target).emulation()
    scope = ModuleScope()
    tracer = MemoryTracer(scope, devices={"meta"})
    with scope, tracer, emulation:
        scope.phase = Phase.FORWARD
        with emulation.autocast(torch.bfloat16, enabled=autocast):
            out = run()
        live = [s for s in tracer.trace.storages if s.free_clock is None and s.alloc_clock != BEFORE_TRACE]
        scope.phase = Phase.BACKWARD
        out.float().sum().backward()
    return live


def rms_norm_run(weight_dtype: torch.dtype = torch.bfloat16) -> tuple[Callable[[], torch.Tensor], torch.Tensor]:
    norm = torch.nn.RMSNorm(HIDDEN, device="meta", dtype=weight_dtype)
    x = torch.empty(ROWS, HIDDEN, device="meta", dtype=torch.bfloat16, requires_grad=True)
    return lambda: norm(x), x


def test_fused_rms_norm_keeps_only_output_and_rstd_on_h100() -> None:
    """_fused_rms_norm_cuda: Y like the input and rstd (rows, 1) in float32; autograd saves input,
    weight and rstd, which already exist. The composite (CPU, and meta itself) also keeps the
    float32 upcast and the normalised product."""
    run, _ = rms_norm_run()
    fused = live_after_forward("h100", run, autocast=False)
    assert sorted(s.nbytes for s in fused) == sorted([ROWS * 4, ROWS * HIDDEN * 2])
    composite = live_after_forward("cpu", run, autocast=False)
    assert sum(s.nbytes for s in composite) == ROWS * 4 + ROWS * HIDDEN * (2 + 4 + 4)


def test_rms_norm_runs_in_fp32_under_cuda_autocast() -> None:
    """rms_norm is on CUDA autocast's fp32 list in 2.13: input and weight are cast to float32, and
    the fused kernel saves the float32 input copy."""
    run, _ = rms_norm_run()
    emulation = resolve_target("h100").emulation()
    with emulation, emulation.autocast(torch.bfloat16):
        assert run().dtype == torch.float32
    live = live_after_forward("h100", run, autocast=True)
    expected = [ROWS * HIDDEN * 4, HIDDEN * 4, ROWS * HIDDEN * 4, ROWS * 4]  # x cast, weight cast, Y, rstd
    assert sorted(s.nbytes for s in live) == sorted(expected)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
def test_rms_norm_with_mismatched_weight_takes_the_composite() -> None:
    """rms_norm_symint: a weight of another dtype than the input falls back to rms_norm_composite."""
    run, _ = rms_norm_run(weight_dtype=torch.float32)
    gpu = live_after_forward("h100", run, autocast=False)
    cpu = live_after_forward("cpu", run, autocast=False)
    assert sorted(s.nbytes for s in gpu) == sorted(s.nbytes for s in cpu)
    assert sum(s.nbytes for s in gpu) == ROWS * 4 + ROWS * HIDDEN * (2 + 4 + 4)


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_cpu_runs_the_rms_norm_composite_as_meta_does() -> None:
    """A real CPU run has no _fused_rms_norm kernel in 2.13: the same ops as on meta, so the cpu
    target needs no rule."""
    ops = {}
    for device in ("cpu", "meta"):
        norm = torch.nn.RMSNorm(HIDDEN, device=device, dtype=torch.bfloat16)
        x = torch.ones(4, HIDDEN, device=device, dtype=torch.bfloat16, requires_grad=True)
        with _Ops() as mode:
            norm(x)
        ops[device] = mode.names
    assert ops["cpu"] == ops["meta"]
    assert "aten.pow" in ops["cpu"] and "aten._fused_rms_norm" not in ops["cpu"]


def cross_entropy_run(logits_dtype: torch.dtype, rows: int = 64, vocab: int = 1000) -> Callable[[], torch.Tensor]:
    logits = torch.empty(rows, vocab, device="meta", dtype=logits_dtype, requires_grad=True)
    labels = torch.zeros(rows, device="meta", dtype=torch.long)
    return lambda: F.cross_entropy(logits, labels, ignore_index=-100)


def test_cross_entropy_on_bf16_logits_keeps_a_fp32_copy_under_cuda_autocast() -> None:
    """cross_entropy_loss is on no CUDA autocast list: log_softmax keeps bf16 (its dtype is given),
    then nll_loss (fp32 list) casts it, and NllLossBackward0 saves that float32 copy."""
    rows, vocab = 64, 1000
    live = live_after_forward("h100", cross_entropy_run(torch.bfloat16, rows, vocab), autocast=True)
    assert sorted(s.nbytes for s in live if s.shape == (rows, vocab)) == [rows * vocab * 2, rows * vocab * 4]
    # CPU autocast lists cross_entropy_loss itself: one cast up front, only float32 log-probs kept.
    live = live_after_forward("cpu", cross_entropy_run(torch.bfloat16, rows, vocab), autocast=True)
    assert [s.nbytes for s in live if s.shape == (rows, vocab)] == [rows * vocab * 4]


def test_cross_entropy_on_fp32_logits_at_llama_8b_scale() -> None:
    """transformers' ForCausalLMLoss upcasts logits (``logits.float()``), so at Llama-3.1-8B scale
    (2048 tokens, 128256 classes) CUDA keeps one float32 log_softmax result, also the saved input
    of nll_loss: 2048 * 128256 * 4 bytes, plus the two scalars of nll_loss_forward."""
    rows, vocab = 2048, 128256
    live = live_after_forward("h100", cross_entropy_run(torch.float32, rows, vocab), autocast=True)
    assert sorted(s.nbytes for s in live) == [4, 4, rows * vocab * 4]


def test_layer_norm_statistics_are_fp32_on_cuda() -> None:
    """cuda/layer_norm_kernel.cu ``layer_norm_cuda``: mean and rstd in acc_type (float32 for bf16),
    which the meta kernel also gives; group_norm.cpp ``native_group_norm`` (shared by CPU and CUDA)
    keeps the input's dtype, as meta does. Under CUDA autocast both run in float32."""
    emulation = resolve_target("h100").emulation()
    x = torch.empty(4, 8, 64, device="meta", dtype=torch.bfloat16)
    with emulation:
        _, mean, rstd = torch.native_layer_norm(x, [64], None, None, 1e-5)
        assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == (4, 8, 1)
        _, mean, _ = torch.native_group_norm(x, None, None, 4, 8, 64, 2, 1e-5)
        assert mean.dtype == torch.bfloat16 and mean.shape == (4, 2)
        with emulation.autocast(torch.bfloat16):
            assert F.layer_norm(x, [64]).dtype == torch.float32
            assert F.group_norm(x, 2).dtype == torch.float32
