"""Where CUDA's kernels allocate other memory than meta execution: scratch buffers inside one op,
and fused kernels that meta tensors only reach through their decomposition."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .cpu_layout import non_overlapping_and_dense, suggest_memory_format

__all__ = [
    "GPU_FUNCTIONS",
    "GpuWorkspaces",
    "cuda_cross_entropy",
    "cuda_dropout",
    "efficient_backward_workspace",
    "foreach_norm_workspace",
    "gpu_rms_norm",
    "matmul_operand_copies",
    "sort_workspace",
]

_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_backward.default
_CUDNN_BACKWARD = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default
_EFFICIENT_BACKWARD = torch.ops.aten._scaled_dot_product_efficient_attention_backward.default
_EMBEDDING_BACKWARD = torch.ops.aten.embedding_dense_backward.default
_MM = torch.ops.aten.mm.default
_ADDMM = torch.ops.aten.addmm.default
_SORT = torch.ops.aten.sort.default
_SORT_STABLE = torch.ops.aten.sort.stable


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def flash_backward_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp ``mha_bwd``.

    ``softmax_d`` (batch, heads, seq_q rounded to 128) and ``dq_accum`` (batch, seq_q rounded,
    heads, head dim rounded to 32) in float32; with grouped-query attention also
    ``dk_expanded`` and ``dv_expanded`` (batch, seq_k, heads, head dim) in the input dtype,
    summed into dk / dv at the end. All are freed when the op returns.
    """
    query, key = args[1], args[2]  # (batch, heads, seq, head_dim)
    batch, heads, seq_q, head_dim = query.shape
    heads_k, seq_k = key.shape[1], key.shape[2]
    seq_q_rounded = _round_up(seq_q, 128)
    softmax_d = batch * heads * seq_q_rounded * 4
    dq_accum = batch * seq_q_rounded * heads * _round_up(head_dim, 32) * 4
    expanded = 2 * batch * seq_k * heads * head_dim * query.element_size() if heads_k != heads else 0
    return softmax_d + dq_accum + expanded


def cudnn_backward_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/cudnn/MHA.cpp ``run_cudnn_SDP_bprop`` takes ``get_workspace_size()`` bytes
    from the caching allocator for the call. cudnn-frontend's share (node/scaled_dot_product_flash_attention.h,
    ``get_fe_workspace_size_node``; cuDNN >= 9.0 without dBias or determinism) is ``dQ_accum``
    (batch, heads, seq_q, head_dim) and ``softmax_sum`` (batch, heads, seq_q) in float32. Grouped
    key/value heads need no expanded dK/dV there: dense ``dK_fullhead``/``dV_fullhead`` are virtual.
    The cuDNN engine's own workspace is opaque and not counted.
    """
    query = args[1]  # (batch, heads, seq_q, head_dim)
    batch, heads, seq_q, head_dim = query.shape
    return batch * heads * seq_q * (head_dim + 1) * 4


# -- memory-efficient attention backward (CUTLASS, CUDA) ----------------------------------------
# Read at pytorch commits 00afd8f2 (transformers/cuda/attention_backward.cu), 00f993df
# (mem_eff_attention/kernel_backward.h) and 045a976c (mem_eff_attention/kernels/generate_kernels.py),
# the stored versions; the installed torch 2.13.0 is cf30153c.

_OPTIN_SHARED_MEMORY_KIB = {
    (7, 0): 96, (7, 5): 64, (8, 0): 163, (8, 6): 99, (8, 7): 163, (8, 9): 99,
    (9, 0): 227, (10, 0): 227, (12, 0): 99, (12, 1): 99,
}  # fmt: skip
"""``cudaDeviceProp::sharedMemPerBlockOptin`` by compute capability (CUDA C++ Programming Guide,
"Technical Specifications per Compute Capability": maximum shared memory per thread block)."""

EFFICIENT_BACKWARD_ROW128_SMEM_KIB = {70: 64, 75: 64, 80: 99}
"""Assumption: the backward kernels with 128-query blocks (``kBlockSizeI`` = 128) need more opt-in
shared memory per block than this many KiB, per kernel family (sm70/sm75 kernels: two-stage,
no preload; sm80 kernels: multistage, preloaded). ``launchKernel`` skips a kernel whose
``sizeof(SharedStorage)`` exceeds ``sharedMemPerBlockOptin``; that size is CUTLASS's and not
computed here. generate_kernels.py says the 64-row fallback exists "for GPUs with less shmem
(Sm75, Sm86 ...)" and generates sequence-aligned 128-row variants only for sm70 and sm80, so
128 rows run on sm70 (96 KiB), sm80/sm87 (163), sm90/sm100 (227), not on sm75 (64) nor
sm86/sm89/sm120 (99)."""

EFFICIENT_BACKWARD_SM80_KERNELS_FROM = 80
"""Assumption: GPUs from sm80 up run the sm80 kernel family (generate_kernels.py: "Sm80 kernels
support up to Sm100"; attention_backward.cu maps sm121 to sm120, so newer builds reach further)."""


@dataclass(frozen=True, slots=True)
class _BackwardKernel:
    """The ``AttentionBackwardKernel`` instantiation ``dispatch_cutlassB`` launches."""

    family: int
    """sm50, sm70, sm75 or sm80: the ``ArchTag`` the kernel was built for."""
    half: bool
    block_i: int
    block_j: int
    max_k: int

    @property
    def output_in_rf(self) -> bool:
        """``kOutputInRF``: dK/dV stay in registers for half types when ``kMaxK <= kBlockSizeI``."""
        return self.half and self.max_k <= self.block_i

    @property
    def split_keys(self) -> bool:
        """``kEnableSplitKeys = kMinSm >= 70``."""
        return self.family >= 70

    @property
    def accumulates_grad_q(self) -> bool:
        """``kNeedsAccumGradQ``: split keys, or an output type other than float."""
        return self.split_keys or self.half

    @property
    def accumulates_grad_kv(self) -> bool:
        """``kNeedsAccumGradK`` / ``kNeedsAccumGradV``: half outputs kept out of registers."""
        return self.half and not self.output_in_rf

    @property
    def computes_delta(self) -> bool:
        """``kKernelComputesDelta = kIsHalf && (kOutputInRF || kMinComputeCapability != 70)``."""
        return self.half and (self.output_in_rf or self.family != 70)


def _backward_kernel(capability: tuple[int, int], half: bool, max_head_dim: int) -> _BackwardKernel:
    """generate_kernels.py ``BwdKernel.get_all`` sorted by ``sort_index`` (aligned, no dropout,
    smallest ``max_k``, largest ``block_i``): the first kernel whose ``kMaxK`` covers the head dims
    and whose shared memory fits. Alignment and dropout variants share block sizes, so they
    leave the workspace unchanged."""
    cc = capability[0] * 10 + capability[1]
    family = 80 if cc >= EFFICIENT_BACKWARD_SM80_KERNELS_FROM else 75 if cc >= 75 else 70 if cc >= 70 else 50
    max_k = next(k for k in (32, 64, 128, 2**16) if k >= max_head_dim)
    if half and cc in (86, 89) and 64 < max_head_dim <= 96:
        # the "stable diffusion" kernel: 128x64, kMaxK 96, preloaded, dispatched only on sm86/sm89
        return _BackwardKernel(family=family, half=half, block_i=128, block_j=64, max_k=96)
    generated = family >= 80 or (family >= 70 and half)  # 128-row kernels exist for these
    tall = generated and max_k > 64 and _OPTIN_SHARED_MEMORY_KIB[capability] > EFFICIENT_BACKWARD_ROW128_SMEM_KIB[family]
    block_i = 128 if tall else 64
    preload = half and family >= 80 and max_k <= block_i
    block_j = 128 if preload and max_k > 64 else 64
    return _BackwardKernel(family=family, half=half, block_i=block_i, block_j=block_j, max_k=max_k)


def _num_splits_key(kernel: _BackwardKernel, batch: int, heads: int, seq_k: int) -> int:
    """attention_backward.cu's key-splitting heuristic (``num_splits_key`` not given by SDPA)."""
    splits = -(-seq_k // kernel.block_j)
    if batch * heads >= 256 and seq_k <= 2 * kernel.block_j:
        splits = 1
    if kernel.accumulates_grad_kv:
        splits = min(splits, 200 // (batch * heads))
    if not kernel.split_keys or splits < 1 or torch.are_deterministic_algorithms_enabled():
        return 1
    return splits


def _kernel_workspace(
    kernel: _BackwardKernel, batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, head_dim_v: int
) -> int:
    """kernel_backward.h ``Params::workspace_size``: per (batch, head), float gK and gV staging
    (``num_splits_key * kBlockSizeJ * align_up(head dim, kBlockSizeI)`` each) and one
    ``GradQTempStorage`` (lock, counter, two pads, ``kBlockSizeI * kBlockSizeJ`` floats) per
    (query block, ``kBlockSizeJ`` columns of head dim); the sum aligned to 4 floats."""
    splits = _num_splits_key(kernel, batch, heads, seq_k)
    grad_k = grad_v = grad_q = 0
    if kernel.accumulates_grad_kv:
        grad_k = splits * kernel.block_j * _round_up(head_dim, kernel.block_i)
        grad_v = splits * kernel.block_j * _round_up(head_dim_v, kernel.block_i)
    if kernel.accumulates_grad_q:
        tiles = -(-seq_q // kernel.block_i) * -(-head_dim // kernel.block_j)
        grad_q = tiles * (4 + kernel.block_i * kernel.block_j)
    return batch * heads * _round_up(grad_k + grad_v + grad_q, 4) * 4


def efficient_backward_workspace(args: tuple[Any, ...], capability: tuple[int, int]) -> int:
    """Peak scratch of attention_backward.cu ``_efficient_attention_backward`` on CUDA, beside
    the gradients meta execution allocates.

    ``grad_out.transpose(1, 2).contiguous()`` copies a gradient not laid out as (B, M, H, Kv).
    ``delta`` (B, H, M) in float32 comes from ``at::empty`` when the kernel computes it; otherwise
    from ``(grad_out.to(float) * out.to(float)).sum(-1).transpose(-2, -1).contiguous()``, whose
    temporaries (two float32 casts of half inputs, the product, the sum) live to the end of that
    statement. Then the ``workspace`` byte tensor of ``Params::workspace_size()``.
    """
    grad_out, query, key, value = args[:4]  # (batch, heads, seq, head_dim)
    batch, heads, seq_q, head_dim = query.shape
    seq_k, head_dim_v = key.shape[2], value.shape[3]
    half = query.dtype in (torch.float16, torch.bfloat16)
    kernel = _backward_kernel(capability, half, max(head_dim, head_dim_v))
    grad_copy = 0 if grad_out.transpose(1, 2).is_contiguous() else grad_out.numel() * grad_out.element_size()
    delta = batch * heads * seq_q * 4
    workspace = delta + _kernel_workspace(kernel, batch, heads, seq_q, seq_k, head_dim, head_dim_v)
    if kernel.computes_delta:
        return grad_copy + workspace
    product = batch * seq_q * heads * head_dim_v * 4
    casts = 2 * product if half else 0
    transposed = delta if heads > 1 and seq_q > 1 else 0
    return grad_copy + max(casts + product + delta + transposed, workspace)


_EMBEDDING_FEATURE_KERNEL_MAX_INDICES = 3072
"""Embedding.cu ``embedding_dense_backward_cuda``: up to 3072 indices (and no ``scale_grad_by_freq``)
take the feature kernel, which allocates nothing beside ``grad_weight``."""


def embedding_backward_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/cuda/Embedding.cu ``embedding_dense_backward_cuda`` above 3072 indices:
    ``sorted_indices``, ``orig_indices``, the ``arange`` it sorts, ``count`` with ``scale_grad_by_freq``;
    then EmbeddingBackwardKernel.cu ``embedding_backward_cuda_kernel``: ``segment_offsets``,
    ``partials_per_segment``, ``partials_per_segment_offset``, ``partial_segment_offset`` (n indices
    each), two int64 counters, and ``grad_weight_per_segment`` (n, embedding dim) in float32 for
    fp16/bf16 gradients, else in the gradient's dtype. All are live together beside ``grad_weight``.
    cub's sort and scan temporaries are not counted.
    """
    grad, indices, _, _, scale_grad_by_freq = args[:5]
    count = indices.numel()
    if count <= _EMBEDDING_FEATURE_KERNEL_MAX_INDICES and not scale_grad_by_freq:
        return 0
    index_arrays = (3 + int(bool(scale_grad_by_freq)) + 4) * count * indices.element_size()
    partial_size = 4 if grad.dtype in (torch.float16, torch.bfloat16) else grad.element_size()
    return index_arrays + 2 * 8 + count * grad.shape[-1] * partial_size


def matmul_operand_copies(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/cuda/Blas.cpp ``prepare_matrix_for_cublas``, which ``addmm_out_cuda_impl`` (``mm``
    and ``addmm``) applies to both matrices: one that is neither dense nor row- or column-major with a
    leading dimension cuBLAS takes is cloned contiguous for the call. The expanded gradient of
    ``logits.sum()`` (strides 0, 0) reaching the head's matmul backward is one: a copy the size of the logits."""
    mat1, mat2 = (args[1], args[2]) if len(args) > 2 else (args[0], args[1])
    return sum(m.numel() * m.element_size() for m in (mat1, mat2) if _cloned_for_cublas(m))


def _cloned_for_cublas(matrix: torch.Tensor) -> bool:
    if non_overlapping_and_dense(matrix.shape, matrix.stride()):
        return False
    (rows, cols), (row_stride, col_stride) = matrix.shape, matrix.stride()
    column_major = row_stride == 1 and col_stride >= max(1, rows)
    row_major = col_stride == 1 and row_stride >= max(1, cols)
    return not (column_major or row_major)


_FOREACH_NORM = torch.ops.aten._foreach_norm.Scalar
_FOREACH_CHUNK = 65536
"""MultiTensorApply.cuh ``kChunkSize``: elements per chunk a block of a foreach kernel handles."""


def foreach_norm_workspace(args: tuple[Any, ...]) -> int:
    """aten/src/ATen/native/cuda/ForeachReduceOp.cu ``_foreach_tensor_norm_cuda_impl`` (the fast route:
    floating tensors of one dtype, p of 1, 2 or inf, as ``clip_grad_norm_`` calls it per device and
    dtype): ``output_per_tensor``, tensors x the largest tensor's chunks of 65,536 elements in the op
    math dtype (float32 for half, bfloat16 and float32), ``global_output`` (320 of them) and the
    scalar ``global_norm``, live together beside the per-tensor norms it returns. Each is its own
    caching-allocator block (512-byte multiples); their sum is returned as one buffer."""
    tensors, ord = args[0], float(args[1]) if len(args) > 1 else 2.0
    if not tensors or ord not in (1.0, 2.0, float("inf")) or not all(t.is_floating_point() for t in tensors):
        return 0
    if len({t.dtype for t in tensors}) > 1:
        return 0
    chunks = max(-(-t.numel() // _FOREACH_CHUNK) for t in tensors)
    math = 8 if tensors[0].dtype == torch.float64 else 4
    return sum(_round_up(max(n, 1), 512) for n in (len(tensors) * chunks * math, 320 * math, tensors[0].element_size()))


_SMALL_SORT_MAX = 4096
"""Sort.h ``should_use_small_sort``: a sorted dim of up to 4096 elements is sorted in place in shared memory
(Sort.cu ``sortKeyValueInplace``) after Sort.cpp ``fillSliceWithIndex`` fills the indices from an ``arange``."""
_FULL_SORT_MAX_SEGMENTS = 128
"""SortStable.cu ``do_launch_stable_sort_kernel``: fewer segments take ``segmented_sort_pairs_by_full_sort``."""
_LARGE_SEGMENT = 1_000_000
"""SortStable.cu: a segment this long, or a single one, takes ``segmented_sort_large_segments``."""
_INT_MAX = 2**31 - 1
"""SortStable.cu sorts at most ``INT_MAX`` elements (whole segments) per chunk; each chunk's buffers are freed
before the next."""
_CUB_ALIGN = 256
"""cub ``AliasTemporaries``: each temporary is aligned to 256 B, and 255 B of slack are added to the blob."""
_INDEX_BYTES = 8
"""``aten.sort`` returns int64 indices; SortStable.cu's reverse indices are of the indices' type."""


def sort_workspace(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """aten/src/ATen/native/cuda/Sort.cpp ``sort_cuda_kernel`` (PyTorch 2.x) over an input that is dense with the
    sorted dim of stride 1 (torch sorts into ``values`` and ``indices`` directly). Up to 4096 elements: the ``arange`` of the
    dim's int64 positions. Above, at 128 segments or more each shorter than 1,000,000 (SortStable.cu
    ``segmented_sort_pairs``): ``reverse_indices`` (int64, one per element) and, in ATen/cuda/cub.cuh
    ``segmented_sort_pairs``, the temp storage of cub's ``DeviceSegmentedRadixSort::SortPairs``, whose pointer
    API (not ``DoubleBuffer``) makes ``DispatchSegmentedRadixSort::InvokePasses`` alias a third keys buffer and
    a third values buffer (one key and one int64 per element) out of it; both live together beside the outputs,
    two caching-allocator blocks (512-byte multiples) returned as one buffer. Not counted: the single- and
    long-segment path and the one under 128 segments (their cub temp storage holds histograms sized by cub's
    tuning policy), an input copied first for its layout, and ROCm's rocprim."""
    keys = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", -1)
    numel = keys.numel()
    if numel == 0 or keys.dim() == 0:  # Sorting.cpp ``sort_stable_out``: a scalar is copied, its index zeroed
        return 0
    dim %= keys.dim()
    nsort = keys.shape[dim]
    if nsort <= _SMALL_SORT_MAX:
        return nsort * _INDEX_BYTES
    if not (non_overlapping_and_dense(keys.shape, keys.stride()) and keys.stride(dim) == 1):
        return 0
    n = min(numel, _INT_MAX // nsort * nsort)  # the first chunk, the largest
    if n // nsort < _FULL_SORT_MAX_SEGMENTS or nsort >= _LARGE_SEGMENT:
        return 0
    reverse_indices = n * _INDEX_BYTES
    alternates = _round_up(n * keys.element_size(), _CUB_ALIGN) + _round_up(n * _INDEX_BYTES, _CUB_ALIGN)
    return _round_up(reverse_indices, 512) + _round_up(alternates + _CUB_ALIGN - 1, 512)


@dataclass(frozen=True, slots=True)
class GpuWorkspaces:
    """``KernelRules.workspaces`` for a CUDA target; the efficient-attention kernel depends on its
    compute capability. ROCm's efficient backward (AOTriton) and sort (rocprim) are not modelled."""

    compute_capability: tuple[int, int]
    rocm: bool = False

    def __call__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
        if func is _FLASH_BACKWARD:
            return [flash_backward_workspace(args)]
        if func is _CUDNN_BACKWARD:
            return [cudnn_backward_workspace(args)]
        if func is _EFFICIENT_BACKWARD and not self.rocm:
            return [efficient_backward_workspace(args, self.compute_capability)]
        if func is _EMBEDDING_BACKWARD:
            nbytes = embedding_backward_workspace(args)
            return [nbytes] if nbytes else []
        if func is _FOREACH_NORM:
            nbytes = foreach_norm_workspace(args)
            return [nbytes] if nbytes else []
        if func is _MM or func is _ADDMM:
            nbytes = matmul_operand_copies(args)
            return [nbytes] if nbytes else []
        if (func is _SORT or func is _SORT_STABLE) and not self.rocm:
            nbytes = sort_workspace(args, kwargs)
            return [nbytes] if nbytes else []
        return []


# -- fused RMSNorm ------------------------------------------------------------------------------


def gpu_rms_norm(
    input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    """aten/src/ATen/native/layer_norm.cpp ``rms_norm_symint``: channels-last or complex input, or a
    weight of another dtype, take ``rms_norm_composite`` (what meta tensors always run, since
    ``_fused_rms_norm`` has no Meta kernel); everything else calls ``_fused_rms_norm``, which CUDA
    implements as one kernel (cuda/layer_norm_kernel.cu ``_fused_rms_norm_cuda``)."""
    channels_last = suggest_memory_format(input) in (torch.channels_last, torch.channels_last_3d)
    mismatch = weight is not None and weight.dtype != input.dtype
    if channels_last or input.is_complex() or mismatch:
        return torch.rms_norm(input, normalized_shape, weight, eps)
    return _FusedRmsNorm.apply(input, weight, tuple(normalized_shape))


class _FusedRmsNorm(torch.autograd.Function):
    """``_fused_rms_norm`` as CUDA runs it. ``_fused_rms_norm_cuda`` allocates ``Y`` like the
    contiguous input and ``rstd`` of (rows,) in ``acc_type`` (float32 for half, bfloat16 and float32
    inputs), viewed to the input's rank; tools/autograd/derivatives.yaml saves ``input``, ``weight``
    and ``result1`` (rstd) and, outside double backward, calls ``_fused_rms_norm_backward``, which has
    a Meta kernel. The composite instead keeps an upcast copy and the normalised product, two
    float32 tensors of the input's size."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor | None, normalized_shape: tuple[int, ...]) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        stat_shape = (*x.shape[: x.dim() - len(normalized_shape)], *[1] * len(normalized_shape))
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        rstd = torch.empty(stat_shape, dtype=acc, device=x.device)
        ctx.save_for_backward(x, weight, rstd)
        ctx.normalized_shape = list(normalized_shape)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, rstd = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[1]]
        grad_input, grad_weight = torch.ops.aten._fused_rms_norm_backward(grad, x, ctx.normalized_shape, rstd, weight, mask)
        return grad_input, grad_weight, None


# -- cross-entropy under autocast ---------------------------------------------------------------


def cuda_cross_entropy(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """aten/src/ATen/native/LossNLL.cpp ``cross_entropy_loss_symint`` for class-index targets without
    label smoothing: ``nll_loss_nd(log_softmax(self, class_dim, self.scalar_type()), ...)``. The
    composite is on no CUDA autocast list, so its inner ops meet autocast: ``log_softmax`` keeps the
    input dtype (its dtype is given), then ``nll_loss`` (fp32 list) casts that to float32, and
    ``NllLossBackward0`` saves the float32 copy beside the low-precision ``log_softmax`` result.
    Written in Python so the emulation's autocast sees those inner calls; other cases keep the
    original composite."""
    if target.is_floating_point() or label_smoothing > 0.0:
        return F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    class_dim = 0 if input.dim() == 1 else 1
    log_probs = torch.log_softmax(input, class_dim, dtype=input.dtype)
    return F.nll_loss(log_probs, target, weight, size_average, ignore_index, reduce, reduction)


# -- dropout ------------------------------------------------------------------------------------


def cuda_dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
    """aten/src/ATen/native/Dropout.cpp ``dropout``: on a GPU (``is_fused_kernel_acceptable``) a
    training dropout with 0 < p < 1 runs the fused ``native_dropout``, which keeps a bool mask for
    backward; meta tensors take ``_dropout_impl``, which keeps noise in the input's dtype (4x the
    mask in float32). In-place dropout never takes the fused kernel."""
    if training and not inplace and 0.0 < p < 1.0 and input.numel() > 0:
        return torch.native_dropout(input, p, True)[0]
    return F.dropout(input, p, training, inplace)


GPU_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    F.rms_norm: gpu_rms_norm,
    torch.rms_norm: gpu_rms_norm,
    F.cross_entropy: cuda_cross_entropy,
    F.dropout: cuda_dropout,
    torch.dropout: lambda input, p, train: cuda_dropout(input, p, train),
}
"""Python-level functions whose CUDA path differs from the one meta tensors take."""
