"""Scratch buffers CUDA kernels allocate inside one op: cuDNN and memory-efficient attention backward,
embedding backward, sort."""

from __future__ import annotations

import torch

from vramsim.config import SimulationConfig
from vramsim.estimators.devices import DEVICES
from vramsim.tracer.kernels.gpu_kernels import (
    GpuWorkspaces,
    efficient_backward_workspace,
    embedding_backward_workspace,
    matmul_operand_copies,
    sort_workspace,
)
from vramsim.workload.build import build_program
from vramsim.workload.targets import resolve_target
from vramsim.workload.tracing import trace_program


def workspaces(
    device: str, model: object, *, batch: int, seq: int, mixed_precision: str | None = "bf16", **options: object
) -> dict[str, set[int]]:
    target = resolve_target(device)
    config = SimulationConfig(batch_size=batch, seq_len=seq, device=device, mixed_precision=mixed_precision, **options)
    with target.emulation() as emulation:
        program = build_program(model, config, device="meta", emulation=emulation, foreach=True)
        trace = trace_program(program, devices=target.counted_devices, workspaces=target.rules.workspaces)
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


def test_cublas_takes_row_and_column_major_matrices_and_copies_the_rest() -> None:
    """Blas.cpp ``prepare_matrix_for_cublas``: dense matrices and a transposed weight go as they are; an
    expanded one (strides 0, 0) is cloned contiguous, in its dtype; ``addmm``'s bias is not a matrix it takes."""
    weight = torch.empty(300, 32, device="meta", dtype=torch.float16)
    dense = torch.empty(64, 300, device="meta", dtype=torch.float16)
    expanded = torch.ones((), device="meta", dtype=torch.float16).expand(64, 300)
    every_other_row = torch.empty(128, 300, device="meta", dtype=torch.float16)[::2]
    assert matmul_operand_copies((dense, weight)) == 0
    assert matmul_operand_copies((torch.empty(32, device="meta"), dense.t(), weight.t().t())) == 0  # addmm
    assert matmul_operand_copies((expanded, weight)) == 64 * 300 * 2
    assert matmul_operand_copies((torch.empty(32, device="meta"), expanded, weight)) == 64 * 300 * 2
    assert matmul_operand_copies((expanded.t(), expanded)) == 2 * 64 * 300 * 2
    assert matmul_operand_copies((every_other_row, weight)) == 0  # row-major with a leading dimension of 600


def test_logits_sum_backward_copies_the_expanded_gradient_on_a_gpu(tiny_bert) -> None:  # type: ignore[no-untyped-def]
    """``logits.sum().backward()`` hands the head's matmul backward a gradient expanded from one element; on
    CUDA each of its two matmuls (input and weight gradients) copies it, the size of the logits."""
    batch, seq = 2, 64
    found = workspaces(
        "a100",
        tiny_bert,
        batch=batch,
        seq=seq,
        mixed_precision=None,
        loss=lambda out: out.logits.sum(),
        model_class="AutoModelForMaskedLM",
    )
    assert batch * seq * tiny_bert.vocab_size * 4 in found["aten.mm"]
    assert "aten.mm" not in workspaces(
        "a100", tiny_bert, batch=batch, seq=seq, mixed_precision=None, model_class="AutoModelForMaskedLM"
    )


def _efficient_args(batch: int, heads: int, seq: int, head_dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """grad_out, query, key, value, bias, out as SDPA's efficient backward gets them: (B, H, M, K)
    views of (B, M, H, K) storage, the layout the kernel writes and HF's transpose leaves."""
    bmhk = torch.empty(batch, seq, heads, head_dim, device="meta", dtype=dtype).transpose(1, 2)
    return bmhk, bmhk, bmhk, bmhk, None, bmhk


def test_efficient_backward_t4_fp16_head_dim_128() -> None:
    """sm75 (64 KiB shared memory): the 64x64 kMaxK=128 kernel; dK/dV leave the registers, so
    float gK/gV staging with num_splits_key = min(2048/64, 200 // 32) = 6."""
    grad_k = grad_v = 6 * 64 * 128  # splits * kBlockSizeJ * align_up(128, kBlockSizeI=64)
    grad_q = (2048 // 64) * (128 // 64) * (4 + 64 * 64)  # GradQTempStorage per (query block, 64 columns)
    workspace = 1 * 32 * (grad_k + grad_v + grad_q) * 4
    delta = 1 * 32 * 2048 * 4  # the kernel computes delta on sm75: at::empty (B, H, M) float
    assert efficient_backward_workspace(_efficient_args(1, 32, 2048, 128, torch.float16), (7, 5)) == workspace + delta


def test_efficient_backward_v100_fp16_head_dim_64() -> None:
    """sm70, kMaxK=64 <= kBlockSizeI=64: dK/dV stay in registers, only the dQ accumulator."""
    grad_q = (2048 // 64) * 1 * (4 + 64 * 64)
    expected = 1 * 32 * grad_q * 4 + 1 * 32 * 2048 * 4
    assert efficient_backward_workspace(_efficient_args(1, 32, 2048, 64, torch.float16), (7, 0)) == expected


def test_efficient_backward_v100_fp16_head_dim_256_computes_delta_outside() -> None:
    """sm70 with kMaxK=65536 (128x64, not in registers): kKernelComputesDelta is false, so delta
    comes from two float32 casts and their product, whose (B, M, H, K) temporaries outlive the sum."""
    splits = min(512 // 64, 200 // 8)
    grad_k = grad_v = splits * 64 * 256  # align_up(256, 128)
    grad_q = (512 // 128) * (256 // 64) * (4 + 128 * 64)
    workspace = 8 * (grad_k + grad_v + grad_q) * 4
    delta = 8 * 512 * 4
    product = 512 * 8 * 256 * 4
    expected = max(3 * product + 2 * delta, delta + workspace)
    assert efficient_backward_workspace(_efficient_args(1, 8, 512, 256, torch.float16), (7, 0)) == expected


def test_efficient_backward_a100_fp32() -> None:
    """sm80 float: 128x64 kMaxK=128, dK/dV written directly; delta from the product (no casts),
    its transposed copy, and the sum, larger here than delta plus the dQ accumulator."""
    grad_q = (2048 // 128) * (128 // 64) * (4 + 128 * 64)
    delta = 32 * 2048 * 4
    product = 2048 * 32 * 128 * 4
    expected = max(product + 2 * delta, delta + 32 * grad_q * 4)
    assert efficient_backward_workspace(_efficient_args(1, 32, 2048, 128, torch.float32), (8, 0)) == expected


def test_efficient_backward_copies_a_bhmk_grad() -> None:
    """``grad_out.transpose(1, 2).contiguous()`` copies a gradient laid out as (B, H, M, K)."""
    args = _efficient_args(1, 4, 256, 64, torch.float16)
    bhmk = torch.empty(1, 4, 256, 64, device="meta", dtype=torch.float16)
    copied = efficient_backward_workspace((bhmk, *args[1:]), (7, 0))
    assert copied - efficient_backward_workspace(args, (7, 0)) == 4 * 256 * 64 * 2


def test_efficient_backward_traced_on_t4(tiny_llama) -> None:  # type: ignore[no-untyped-def]
    """fp16 training on a T4 runs the efficient kernel; its scratch is recorded per call (head
    dim 16: one 64x64 dQ tile per (batch, head), delta (B, H, M) float), and flash's is absent."""
    tiny_llama.num_key_value_heads = tiny_llama.num_attention_heads  # the efficient backend takes no GQA
    batch, seq, heads = 2, 64, tiny_llama.num_attention_heads
    found = workspaces("t4", tiny_llama, batch=batch, seq=seq, mixed_precision="fp16")
    expected = batch * heads * (4 + 64 * 64) * 4 + batch * heads * seq * 4
    assert found["aten._scaled_dot_product_efficient_attention_backward"] == {expected}
    assert "aten._scaled_dot_product_flash_attention_backward" not in found


def test_every_nvidia_target_has_a_shared_memory_size() -> None:
    """Every catalog GPU resolves an efficient backward kernel (no missing compute capability)."""
    args = _efficient_args(1, 2, 128, 128, torch.float16)
    for profile in DEVICES.values():
        if profile.vendor == "nvidia":
            assert efficient_backward_workspace(args, profile.compute_capability) > 0


def _up(nbytes: int, multiple: int) -> int:
    return -(-nbytes // multiple) * multiple


def _segmented_sort_bytes(n: int, key_bytes: int) -> int:
    """SortStable.cu ``segmented_sort_pairs``: int64 ``reverse_indices``, then cub's temp storage: a third keys and
    a third int64 values buffer, each aligned to 256 B, plus 255 B (``AliasTemporaries``); each block in 512 B."""
    cub_temp = _up(n * key_bytes, 256) + _up(n * 8, 256) + 255
    return _up(n * 8, 512) + _up(cub_temp, 512)


def test_sort_of_the_sampler_logits_allocates_twenty_bytes_per_element() -> None:
    """1,024 rows of 128,256 float32 logits: 8 B of reverse indices, 4 + 8 B of cub's alternate keys and values."""
    scores = torch.empty(1024, 128256, device="meta")
    n = scores.numel()
    assert sort_workspace((scores, -1, False), {}) == _segmented_sort_bytes(n, 4) == 20 * n + 512


def test_sort_workspace_aligns_each_cub_buffer() -> None:
    """200 rows of 5,001 halves: neither buffer is a multiple of 256 B."""
    keys = torch.empty(200, 5001, device="meta", dtype=torch.float16)
    assert sort_workspace((keys,), {}) == _segmented_sort_bytes(200 * 5001, 2) == 18_004_992


def test_sort_of_up_to_4096_elements_is_in_place_after_an_arange() -> None:
    """Sort.h: up to 4096 elements sort in shared memory; only ``fillSliceWithIndex``'s int64 ``arange`` is allocated."""
    assert sort_workspace((torch.empty(1024, 4096, device="meta"),), {}) == 4096 * 8
    assert sort_workspace((torch.empty(1024, 4097, device="meta"),), {}) == _segmented_sort_bytes(1024 * 4097, 4)
    assert sort_workspace((torch.empty((), device="meta"),), {}) == 0


def test_sort_workspace_reads_the_stable_overload_and_skips_paths_not_modelled() -> None:
    """``sort.stable`` takes ``dim`` as a keyword; a sorted dim of stride 1 is sorted where it lies, one of another
    stride is copied first (not counted); under 128 segments and a single segment take paths not counted; ROCm's
    sort is not modelled."""
    stable, h100 = torch.ops.aten.sort.stable, GpuWorkspaces((9, 0))
    rows = torch.empty(256, 8192, device="meta")
    assert h100(stable, (rows,), {"stable": True, "dim": -1}) == [_segmented_sort_bytes(256 * 8192, 4)]
    assert h100(stable, (rows.t(),), {"stable": True, "dim": 0}) == [_segmented_sort_bytes(256 * 8192, 4)]  # stride 1
    assert h100(stable, (torch.empty(8192, 256, device="meta"),), {"stable": True, "dim": 0}) == []
    assert h100(torch.ops.aten.sort.default, (rows[:127],), {}) == []
    assert h100(torch.ops.aten.sort.default, (rows[0],), {}) == []
    assert GpuWorkspaces((9, 0), rocm=True)(stable, (rows,), {"stable": True}) == []
