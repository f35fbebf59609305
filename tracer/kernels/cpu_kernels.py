"""Scratch memory that PyTorch's CPU kernels allocate inside an op, read from their source.

Meta execution runs none of these kernels, so the buffers below are invisible to dispatch-level
tracing; each rule returns the bytes the real kernel asks c10's CPU allocator for while the op
runs (its outputs excluded). Every number comes from the cited C++ (PyTorch 2.13 and the oneDNN
v3.12 it bundles, git 80afa71049); nothing is fitted to measurements.

Rules:
    ``matmul_workspaces``   aten.mm / aten.addmm: operand copies made by ``addmm_impl_cpu_``
                            and the scratchpad of the oneDNN matmul the bf16 path runs.
    ``conv2d_workspaces``   aten.convolution / convolution_backward on the "slow" (im2col,
                            vol2col for 3-D) CPU backends: the unfolded-input buffer (oneDNN
                            convolutions: onednn_conv.py).

Known limitations:
    - The oneDNN scratchpad is modelled for the two implementations oneDNN picks for bf16 on
      AVX-512 CPUs without AMX: ``brg_matmul:avx512_core_bf16`` where the CPU has AVX512-BF16,
      ``gemm:jit:bf16`` (bf16 emulated on ``avx512_core``) where it has not. On CPUs with AMX,
      AVX-512 FP16 or AVX10, or bf16 on AVX2 (``avx2_vnni_2``), oneDNN picks other
      implementations; no scratchpad is added there (see ``onednn_brgemm_isa``).
    - bf16/fp16 ``bmm`` through ``mkldnn_matmul`` is not modelled yet.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

import torch

__all__ = [
    "brgemm_matmul_scratchpad",
    "conv2d_workspaces",
    "conv_backend",
    "gemm_bf16_matmul_scratchpad",
    "matmul_workspaces",
    "onednn_brgemm_isa",
]


# -- oneDNN brgemm matmul ----------------------------------------------------------------------


@lru_cache(maxsize=1)
def onednn_brgemm_isa() -> str | None:
    """The oneDNN ISA whose bf16 matmul implementation serves bf16 GEMMs on this CPU, if it is modelled.

    PyTorch sends a bf16 GEMM to oneDNN only when ``mkldnn_bf16_device_check()`` holds
    (aten/src/ATen/native/mkldnn/Utils.h, ``ideep::has_bf16_type_support``: oneDNN's ISA is at
    least ``avx512_core``; exposed as ``torch.ops.mkldnn._is_mkldnn_bf16_supported``). oneDNN then
    takes the first implementation in src/cpu/matmul/cpu_matmul_list.cpp that accepts it, for the
    best ISA the CPU has (src/cpu/x64/cpu_isa_traits.hpp):
      - AMX, AVX-512 FP16 or AVX10 machines: ``avx512_core_amx`` / ``avx512_core_fp16`` brgemm,
        whose blocking is not modelled: None.
      - AVX512-BF16 (with VNNI): ``brg_matmul:avx512_core_bf16``: ``"avx512_core_bf16"``.
      - AVX-512 without AVX512-BF16 (Skylake, Cascade Lake, Ice Lake servers): every brgemm
        matmul declines bf16 (``brgemm_matmul_t<avx512_core_bf16>`` needs that ISA, the
        ``avx512_core_vnni`` one is int8, the ``avx512_core`` one f32), and
        src/cpu/matmul/gemm_bf16_matmul.cpp ``gemm_bf16_matmul_t<bf16>`` (``gemm:jit:bf16``,
        ``x64::mayiuse(avx512_core)``, bf16 emulated) takes it: ``"avx512_core"``.
    """
    if not torch.backends.mkldnn.is_available() or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return None
    caps = torch._C._cpu._get_cpu_capability()
    if caps.get("amx_tile") or caps.get("amx_bf16") or caps.get("avx10_2") or caps.get("avx512_fp16"):
        return None
    core = all(caps.get(k) for k in ("avx512_f", "avx512_bw", "avx512_vl", "avx512_dq"))
    if core and caps.get("avx512_vnni") and caps.get("avx512_bf16"):
        return "avx512_core_bf16"
    if core and not caps.get("avx512_bf16"):
        return "avx512_core"
    return None


def gemm_bf16_matmul_scratchpad(M: int, N: int, *, nthr: int, batch: int = 1) -> int:
    """Bytes of the scratchpad of oneDNN's ``gemm:jit:bf16`` for a bf16 matmul ``dst[batch, M, N]``
    with a bf16 destination and user scratchpad mode.

    src/cpu/matmul/gemm_bf16_matmul.cpp ``pd_t::init``: the destination is bf16, so it is not the
    f32 accumulator (``dst_is_acc_`` false) and ``gemm_based::book_acc_scratchpad``
    (src/cpu/matmul/gemm_based_common.hpp) books ``key_matmul_dst_in_acc_dt`` of
    ``get_scratchpad_num_elements`` f32 elements. Unlike gemm_f32_matmul.cpp, the bf16 matmul never
    sets ``use_single_gemm_call_optimization_`` (false in ``params_t``), so that is one block per
    thread, ``get_scratchpad_block_elements``: of the ``div_up(batch * M * N, nthr)`` outputs a
    thread computes, whole rows of N (at most M * N) or, below one row, all of them, rounded up to
    64; and no less than the one-thread block. No scales are booked (PyTorch passes none). The
    booking pads by 128 bytes (src/common/memory_tracking.hpp). The jit GEMM's own packing buffers
    (src/cpu/x64/gemm/gemm_driver.cpp) are oneDNN's ``malloc``, not c10's allocator: not counted.
    """

    def block(threads: int) -> int:
        work_per_thr = _div_up(batch * M * N, threads)
        size = min(M * N, work_per_thr // N * N) if work_per_thr >= N else work_per_thr
        return _rnd_up(size, 64)

    elements = max(block(nthr) * nthr, block(1))
    return elements * 4 + 128


def _f32(value: float) -> float:
    """Round to IEEE single precision: the heuristic's scores are C++ ``float``."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _div_up(a: int, b: int) -> int:
    return -(-a // b)


def _rnd_up(a: int, b: int) -> int:
    return _div_up(a, b) * b


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _spatial_disbalance(work: int, thread_block: int) -> float:
    """brgemm_matmul_utils.cpp ``matmul_avx512_blocking_params_t::calculate_spatial_disbalance``."""
    mod = work % thread_block
    scalar = thread_block - mod if work < thread_block else min(thread_block - mod, mod)
    return _f32(_f32(scalar) / thread_block)


def _imbalance(
    M: int, N: int, K: int, batch: int, nthr: int, m_blk: int, n_chunks: int, n_blk: int, k_blk: int, nthr_k: int
) -> float:
    """brgemm_matmul_utils.cpp ``matmul_avx512_blocking_params_t::get_imbalance`` (m_chunks = 1)."""
    cur_nthr = nthr // nthr_k
    parallel_work = _div_up(M, m_blk) * _div_up(N, n_blk * n_chunks) * batch
    parallel_work_disb = _spatial_disbalance(parallel_work, cur_nthr)
    m_work = (m_blk * _div_up(M, m_blk)) % M
    m_blk_disbalance = _f32(_f32(m_work) / M)
    num_n_blk = _div_up(N, n_blk)
    par_n_chunks = _div_up(num_n_blk, n_chunks)
    n_chunk_disbalance = _f32(_f32(_f32(_f32(par_n_chunks) * n_chunks) - num_n_blk) / num_n_blk)
    disbalance_nthr_k = _spatial_disbalance(K, nthr_k * k_blk)
    thread_allocation_disb = _f32(_f32(_f32(nthr) - cur_nthr * nthr_k) / nthr) if cur_nthr * nthr_k != nthr else 0.0
    total = 0.0
    for term in (parallel_work_disb, m_blk_disbalance, n_chunk_disbalance, thread_allocation_disb, disbalance_nthr_k):
        total = _f32(total + term)
    return _f32(total / 5)


_A_DT = _B_DT = 2
"""Bytes of a bf16 source or weight element."""
_ACC_DT = 4
"""Bytes of the f32 accumulator element."""
_WEI_N_BLK = 64
"""``get_default_n_block``: the copy-B buffer's N block."""


def brgemm_matmul_scratchpad(
    M: int, N: int, K: int, *, src_transposed: bool, wei_transposed: bool, nthr: int, batch: int = 1
) -> int:
    """Bytes of the scratchpad of oneDNN's ``brg_matmul:avx512_core_bf16`` for a bf16 matmul
    ``dst[M, N] = src[M, K] @ wei[K, N]`` with a bf16 destination and user scratchpad mode.

    src/cpu/x64/matmul/brgemm_matmul_utils.cpp, in call order:
      - ``init_brgemm_matmul_conf``: ``use_buffer_a`` iff A is transposed (and not M == 1);
        ``use_buffer_b`` from ``brgemm_matmul_conf_utils_t::use_buffer_b``: true for bf16 with a
        plain or transposed B; ``wei_n_blk`` = 64 (``get_default_n_block``).
      - ``compute_blocking_heuristic``: N_blk = min(64, N); ``prefer_copy_a`` for M >= 1024 with
        a big power-of-two K; then ``compute_blocking_heuristic_avx512`` searches M_blk,
        N_chunk_size and nthr_k for the lowest ``get_imbalance``.
      - ``matmul_avx512_blocking_params_t::update_configuration``: ``use_buffer_c`` holds for bf16
        destinations (accumulation is f32; ``K_chunk_elems`` is still zero there).
      - ``init_aux_values``: per-thread buffer sizes.
      - ``init_scratchpad`` books batch elements, buffers A, B and C; every booking pads by
        128 bytes (src/common/memory_tracking.hpp ``registry_t::book``, ``get_alignment``).
    """
    treat_a_as_plain = M == 1
    transposed_a = src_transposed and not treat_a_as_plain
    use_buffer_a = transposed_a
    n_blk = min(_WEI_N_BLK, N)
    prefer_copy_a = (not transposed_a) and _is_pow2(K) and 8192 // _A_DT <= K and M >= 1024
    use_buffer_a = use_buffer_a or prefer_copy_a
    k_blk = min(K, 1024 if K > 1024 and not src_transposed else 512)  # use_extended_k_blk
    m_blk, n_chunk_size, nthr_k = _brgemm_blocking(
        M, N, K, src_transposed=src_transposed, use_buffer_a=use_buffer_a, n_blk=n_blk, k_blk=k_blk, nthr=nthr, batch=batch
    )
    del wei_transposed  # plain and transposed B both take the copy-B buffer for bf16
    buffer_a, buffer_b, buffer_c = _brgemm_buffers(
        M, N, K, m_blk=m_blk, n_blk=n_blk, k_blk=k_blk, n_chunk_size=n_chunk_size, nthr_k=nthr_k, use_buffer_a=use_buffer_a
    )
    batch_elements = 16 * 1  # brgemm_batch_element_per_thr_sz = 16 * brgemm_batch_size

    # init_scratchpad; sizeof(brgemm_batch_element_t) = 40 (brgemm_types.hpp)
    bookings = [nthr * batch_elements * 40, nthr * buffer_a, nthr * buffer_b, nthr * buffer_c]
    return sum(size + 128 for size in bookings if size > 0)


def _brgemm_blocking(
    M: int, N: int, K: int, *, src_transposed: bool, use_buffer_a: bool, n_blk: int, k_blk: int, nthr: int, batch: int
) -> tuple[int, int, int]:
    """``compute_blocking_heuristic_avx512``'s search: the M block, N chunk and K threads of least imbalance.

    bf16: need_large_m_blk, k-partitioning and large m blocking are f32-only; n_blk is fixed
    because B's layout is given, not "any".
    """
    max_m_blk = min(256, M)
    min_m_blk = min(32, M)
    n_chunks_total = _div_up(N, n_blk)
    n_chunks_start = min(16 if use_buffer_a else 1, n_chunks_total)
    start_nthr_k = 1
    if nthr > batch * n_chunks_total:  # low_parallel_work
        min_m_blk = min(M, 16)
        if batch == 1 and src_transposed and _is_pow2(K) and K >= 2048:  # bwd_w_par_k_blk
            start_nthr_k = min(nthr, 4)
    best = (1.0, min_m_blk, 1, 1)
    for nthr_k in range(start_nthr_k, 0, -1):
        found = False
        for n_chunk_size in range(n_chunks_start, 0, -1):
            for m_blk in range(max_m_blk, min_m_blk - 1, -1):
                score = _imbalance(M, N, K, batch, nthr, m_blk, n_chunk_size, n_blk, k_blk, nthr_k)
                work = batch * _div_up(M, m_blk) * _div_up(N, n_blk * n_chunk_size)
                nthr_bmn = nthr // nthr_k
                if work < nthr_bmn * 3 and work % nthr_bmn != 0 and start_nthr_k == 1:
                    continue
                if score < best[0]:
                    best, found = (score, m_blk, n_chunk_size, nthr_k), True
        if not found:
            score = _imbalance(M, N, K, batch, nthr, min_m_blk, 1, n_blk, k_blk, nthr_k)
            if score < best[0]:
                best = (score, min_m_blk, 1, nthr_k)
    _, m_blk, n_chunk_size, nthr_k = best
    return m_blk, n_chunk_size, nthr_k


def _brgemm_buffers(
    M: int, N: int, K: int, *, m_blk: int, n_blk: int, k_blk: int, n_chunk_size: int, nthr_k: int, use_buffer_a: bool
) -> tuple[int, int, int]:
    """``update_configuration`` and ``init_aux_values``: one thread's copy-A, copy-B and accumulator buffers."""
    k_blk_conf = k_blk  # required_k_granularity is 1 off AMX
    ldc = n_blk  # use_buffer_c (always for bf16 dst) and nthr_k <= 1 -> N_blk; else LDD
    if nthr_k > 1:
        ldc = N
    buffer_c_chunk = _ACC_DT * ldc * (M if nthr_k > 1 else m_blk)
    buffer_c = buffer_c_chunk if (nthr_k > 1 or k_blk_conf >= K) else buffer_c_chunk * n_chunk_size
    buffer_a = 0
    if use_buffer_a:
        lda = _rnd_up(k_blk_conf, 64 // _A_DT)  # get_actual_lda
        if lda >= 512 and _is_pow2(lda):
            lda += 64 // _A_DT
        buffer_a = _A_DT * m_blk * lda
    wei_k_blk = 16 * 2  # get_wei_k_blk: 16 x bf16 VNNI granularity
    ldb = _WEI_N_BLK  # get_actual_LDB with use_buffer_b
    buffer_b = _B_DT * _rnd_up(n_blk, ldb) * _rnd_up(k_blk_conf, wei_k_blk)
    return buffer_a, buffer_b, buffer_c


# -- addmm_impl_cpu_ -> cpublas::gemm -> mkldnn_bf16_gemm ---------------------------------------

_MM = torch.ops.aten.mm.default
_ADDMM = torch.ops.aten.addmm.default


def matmul_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """aten/src/ATen/native/LinearAlgebra.cpp ``addmm_impl_cpu_`` (``mm_out_cpu``, ``addmm_out_cpu``).

    It views the row-major result as a column-major GEMM (``transpose_c``), clones an operand
    whose strides fit neither layout, and calls ``cpublas::gemm``. For bf16, that is
    aten/src/ATen/native/CPUBlas.cpp ``gemm`` -> ``internal::normalize_last_dims`` ->
    aten/src/ATen/native/mkldnn/Matmul.cpp ``mkldnn_bf16_gemm`` -> ``mkldnn_gemm``, which skips
    oneDNN when ``m * n * k <= 16 * 16 * 16`` and otherwise runs ``ideep::matmul_forward`` on
    ``C^T = B^T A^T``: oneDNN's src is the GEMM's b (n x k), its weights the GEMM's a (k x m).
    The scratchpad ideep allocates for it goes through c10's CPU allocator
    (aten/src/ATen/native/mkldnn/IDeepRegistration.cpp).
    """
    operands = _mm_operands(func, args, kwargs)
    if operands is None:
        return []
    m1, m2, alpha = operands
    if not isinstance(m1, torch.Tensor) or m1.dim() != 2 or m2.dim() != 2:
        return []
    rows, cols = m1.shape[0], m2.shape[1]
    if rows * cols == 0 or m1.shape[1] == 0:
        return []
    # The result is a fresh row-major (rows, cols) tensor: its strides (cols, 1) take the
    # first branch (column-major as is) only when cols == 1, else the second (transpose_c).
    transpose_c = cols != 1
    a_src, b_src = (m2, m1) if transpose_c else (m1, m2)
    m = cols if transpose_c else rows
    n = rows if transpose_c else cols
    k = m1.shape[1]
    workspace = 0
    transpose_a, a_strides, a_clone = _gemm_operand(a_src, transpose_c, m, k)
    transpose_b, b_strides, b_clone = _gemm_operand(b_src, transpose_c, k, n)
    workspace += a_clone + b_clone
    lda = a_strides[1 if transpose_a == transpose_c else 0]
    ldb = b_strides[1 if transpose_b == transpose_c else 0]
    scratch = 0
    isa = onednn_brgemm_isa()
    if m1.dtype == torch.bfloat16 and alpha != 0 and isa and torch.backends.mkldnn.enabled:
        scratch = _bf16_gemm_scratchpad(isa, m, n, k, transpose_a=transpose_a, lda=lda, transpose_b=transpose_b, ldb=ldb)
    total = workspace + scratch
    return [total] if total else []


def _mm_operands(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    """``mm``'s or ``addmm``'s two matrices and ``alpha``; None for any other op."""
    if func is _MM:
        return args[0], args[1], 1.0
    if func is _ADDMM:
        return args[1], args[2], kwargs.get("alpha", args[4] if len(args) > 4 else 1)
    return None


def _bf16_gemm_scratchpad(isa: str, m: int, n: int, k: int, *, transpose_a: bool, lda: int, transpose_b: bool, ldb: int) -> int:
    """``mkldnn_bf16_gemm``'s oneDNN scratchpad for the column-major GEMM ``m x n x k``; 0 where it skips oneDNN."""
    # normalize_last_dims: degenerate leading dimensions are rewritten
    if transpose_a:
        lda = k if m == 1 else lda
    elif k == 1:
        lda = m
    if transpose_b:
        ldb = n if k == 1 else ldb
    elif n == 1:
        ldb = k
    if m * n * k <= 16 * 16 * 16:
        return 0
    if isa == "avx512_core":
        return gemm_bf16_matmul_scratchpad(n, m, nthr=torch.get_num_threads())
    # ideep src = b as {n, k} with strides {ldb, 1} (swapped if transposed);
    # ideep weights = a as {k, m} with strides {lda, 1} (swapped if transposed).
    return brgemm_matmul_scratchpad(
        n,
        m,
        k,
        src_transposed=_is_transposed_2d((n, k), (1, ldb) if transpose_b else (ldb, 1)),
        wei_transposed=_is_transposed_2d((k, m), (1, lda) if transpose_a else (lda, 1)),
        nthr=torch.get_num_threads(),
    )


def _gemm_operand(t: torch.Tensor, transpose_c: bool, rows_first: int, inner: int) -> tuple[bool, tuple[int, int], int]:
    """How ``addmm_impl_cpu_`` casts one operand: (transposed, strides used, bytes cloned).

    ``rows_first``/``inner`` are the (m, k) pair for the a operand and (k, n) for b: the checks
    are ``strides[tc ? 1 : 0] == 1 && strides[tc ? 0 : 1] >= max(1, rows_first)`` (as is), then
    ``strides[tc ? 0 : 1] == 1 && strides[tc ? 1 : 0] >= max(1, inner)`` (transposed), else a
    contiguous clone with ``transpose = !transpose_c``.
    """
    s = t.stride()
    i0, i1 = (1, 0) if transpose_c else (0, 1)
    if s[i0] == 1 and s[i1] >= max(1, rows_first):
        return False, (s[0], s[1]), 0
    if s[i1] == 1 and s[i0] >= max(1, inner):
        return True, (s[0], s[1]), 0
    contiguous = (t.shape[1], 1)
    return (not transpose_c), contiguous, t.numel() * t.element_size()


def _is_transposed_2d(dims: tuple[int, int], strides: tuple[int, int]) -> bool:
    """Whether oneDNN tags a 2-D operand 'ba' (transposed) rather than 'ab' (plain).

    brgemm_matmul_utils.cpp ``set_or_check_tags``: ``memory_desc_matches_one_of_tag(plain,
    transposed)`` compares with each tag's dense strides, skipping unit dimensions
    (src/common/memory_desc_wrapper.hpp ``similar_to``). When exactly one tag matches, it is
    taken; when both or neither do, ``gemm_based::check_gemm_input_format`` decides through
    cpu/matmul/matmul_utils.hpp ``transA``: 'N' iff ``strides[1] == 1 and dims[0] > 1``.
    """

    def matches(dense: tuple[int, int]) -> bool:
        return all(d == 1 or s == e for d, s, e in zip(dims, strides, dense, strict=True))

    plain, transposed = matches((dims[1], 1)), matches((1, dims[0]))
    if plain != transposed:
        return transposed
    return not (strides[1] == 1 and dims[0] > 1)


# -- convolution backends ----------------------------------------------------------------------


def conv_backend(
    x: torch.Tensor,
    weight: torch.Tensor,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> torch._C._ConvBackend:  # type: ignore[name-defined]  # torch's stub spells it ConvBackend
    """The backend aten/src/ATen/native/Convolution.cpp ``_select_conv_backend`` picks on the CPU.

    PyTorch's own selector runs on CPU stand-ins with the inputs' shapes and dtypes; it reads no
    strides (``ConvParams::use_mkldnn``, ``use_nnpack``: batch size, kernel size, numel, thread
    count), so the stand-ins' strides are zero and they cost a few bytes.
    """
    stand_ins = [torch.empty_strided(tuple(t.shape), [0] * t.dim(), dtype=t.dtype) for t in (x, weight)]
    return torch._C._select_conv_backend(
        *stand_ins, None, list(stride), list(padding), list(dilation), transposed, list(output_padding), groups
    )


# -- slow (im2col) convolution -----------------------------------------------------------------

_CONV = torch.ops.aten.convolution.default
_CONV_BACKWARD = torch.ops.aten.convolution_backward.default
_SLOW2D = torch._C._ConvBackend.Slow2d  # type: ignore[attr-defined]  # torch's stub spells it ConvBackend
_SLOW3D = torch._C._ConvBackend.Slow3d  # type: ignore[attr-defined]


def conv2d_workspaces(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """The unfolded-input (im2col) buffer of the CPU ``Slow2d`` convolution backend.

    aten/src/ATen/native/Convolution.cpp ``_select_conv_backend`` picks ``Slow2d`` on the CPU
    for a non-transposed, non-dilated 2-D (or 1-D, viewed as 2-D) convolution with one group
    when ``ConvParams::use_mkldnn`` and ``use_nnpack`` decline it (``conv_backend``). Then
    aten/src/ATen/native/ConvolutionMM2d.cpp ``slow_conv2d_forward_out_cpu`` allocates
    ``finput`` of ``[N, C * kh * kw, Ho * Wo]`` (unless the kernel is 1x1 with stride 1 and no
    padding, where it is a view of the input) and frees it on return; backward's
    ``compute_columns2d`` rebuilds the same columns for the weight gradient.
    A 3-D convolution the selector sends to ``Slow3d`` (batch 1 or a small one, where oneDNN
    declines) gets the same from aten/src/ATen/native/ConvolutionMM3d.cpp ``compute_columns3d``:
    ``[N, C * kt * kh * kw, To * Ho * Wo]`` (a view for a 1x1x1 kernel, stride 1, no padding).
    The oneDNN backend's buffers are ``onednn_conv.py``'s; NNPACK's are not modelled.
    """
    if func is _CONV:
        x, weight, params = args[0], args[1], args[3:9]
        wants_columns = True
    elif func is _CONV_BACKWARD:
        x, weight, params = args[1], args[2], args[4:10]
        wants_columns = bool(args[10][1])  # output_mask: weight gradient requested
    else:
        return []
    if not isinstance(x, torch.Tensor) or x.dim() not in (3, 4, 5) or params[5] != 1:
        return []  # groups > 1: _convolution_nogroup runs one group at a time (not modelled)
    if x.dim() == 5:
        return _vol2col(x, weight, params, wants_columns)
    if conv_backend(x, weight, *params) != _SLOW2D:
        return []
    stride, padding = params[0], params[1]
    shape: tuple[int, ...]
    if x.dim() == 3:  # _convolution: view1d_as_2d
        shape, kernel = (x.shape[0], x.shape[1], 1, x.shape[2]), (1, weight.shape[2])
        stride, padding = (1, stride[0]), (0, padding[0])
    else:
        shape, kernel = tuple(x.shape), (weight.shape[2], weight.shape[3])
        stride, padding = _pair(stride), _pair(padding)
    if not wants_columns or (kernel == (1, 1) and stride == (1, 1) and padding == (0, 0)):
        return []
    n, c, h, w = shape
    out_h = (h + 2 * padding[0] - kernel[0]) // stride[0] + 1
    out_w = (w + 2 * padding[1] - kernel[1]) // stride[1] + 1
    return [n * c * kernel[0] * kernel[1] * out_h * out_w * x.element_size()]


def _vol2col(x: torch.Tensor, weight: torch.Tensor, params: Any, wants_columns: bool) -> list[int]:
    """``Slow3d``'s columns (``conv2d_workspaces``), from the shapes of a 5-D input and weight. The backward of a
    1x1x1 kernel, whose weight gradient needs no columns, allocates a small grad-input buffer not modelled here."""
    if not wants_columns or conv_backend(x, weight, *params) != _SLOW3D:
        return []
    stride, padding = _triple(params[0]), _triple(params[1])
    kernel = tuple(weight.shape[2:5])
    if kernel == (1, 1, 1) and stride == (1, 1, 1) and padding == (0, 0, 0):
        return []
    n, c = x.shape[0], x.shape[1]
    out = [(size + 2 * pad - k) // step + 1 for size, pad, k, step in zip(x.shape[2:5], padding, kernel, stride, strict=True)]
    return [n * c * kernel[0] * kernel[1] * kernel[2] * out[0] * out[1] * out[2] * x.element_size()]


def _triple(value: Any) -> tuple[int, int, int]:
    values = list(value)
    return (values[0],) * 3 if len(values) == 1 else (values[0], values[1], values[2])


def _pair(value: Any) -> tuple[int, int]:
    values = list(value)
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])
