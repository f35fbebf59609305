"""Scratch buffers CUDA kernels allocate inside one op: cuDNN attention backward, embedding backward."""

from __future__ import annotations

import torch

from vramsim.build import build_workload
from vramsim.config import SimulationConfig
from vramsim.targets import resolve_target
from vramsim.tracer.gpu_kernels import embedding_backward_workspace
from vramsim.tracing import trace_workload


def workspaces(device: str, model: object, *, batch: int, seq: int) -> dict[str, set[int]]:
    target = resolve_target(device)
    config = SimulationConfig(batch_size=batch, seq_len=seq, device=device, mixed_precision="bf16")
    with target.emulation() as emulation:
        work = build_workload(model, config, device="meta", emulation=emulation, foreach=True)
        trace = trace_workload(work, devices=target.counted_devices, workspaces=target.rules.workspaces)
    found: dict[str, set[int]] = {}
    for s in trace.storages:
        if s.op.endswith(":workspace"):
            found.setdefault(s.op.removesuffix(":workspace"), set()).add(s.nbytes)
    return found


def test_cudnn_backward_scratch_on_h100(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """cudnn-frontend's dQ accumulator and softmax sum, fp32, per call; no expanded dK/dV for GQA."""
    batch, seq = 2, 64
    heads, head_dim = tiny_llama.num_attention_heads, tiny_llama.hidden_size // tiny_llama.num_attention_heads
    found = workspaces("h100", tiny_llama, batch=batch, seq=seq)
    assert found["aten._scaled_dot_product_cudnn_attention_backward"] == {batch * heads * seq * (head_dim + 1) * 4}
    assert "aten._scaled_dot_product_flash_attention_backward" not in found


def test_embedding_backward_sorts_above_3072_indices(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """Embedding.cu: 3072 indices or fewer take the feature kernel (no scratch); more are sorted and
    summed per segment in fp32, (indices, dim), beside seven index arrays and two counters."""
    dim = tiny_llama.hidden_size
    assert "aten.embedding_dense_backward" not in workspaces("a100", tiny_llama, batch=2, seq=1536)
    found = workspaces("a100", tiny_llama, batch=2, seq=2048)
    indices = 2 * 2048
    assert found["aten.embedding_dense_backward"] == {7 * indices * 8 + 2 * 8 + indices * dim * 4}


def test_embedding_backward_partials_are_fp32_for_half_grads() -> None:
    grad = torch.empty(8192, 4096, device="meta", dtype=torch.bfloat16)
    indices = torch.empty(8192, device="meta", dtype=torch.long)
    assert embedding_backward_workspace((grad, indices, 128256, -1, False)) == 7 * 8192 * 8 + 16 + 8192 * 4096 * 4
    assert embedding_backward_workspace((grad, indices, 128256, -1, True)) == 8 * 8192 * 8 + 16 + 8192 * 4096 * 4
