"""autocast's op lists per device type, transcribed from aten/src/ATen/autocast_mode.cpp
(``TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)``) and autocast_mode.h (``AT_FORALL_*`` for CUDA).
Names are aten op names without overloads; the emulation maps Python names onto them."""

from __future__ import annotations

__all__ = [
    "CPU_FP32",
    "CPU_LOWER_PRECISION",
    "CPU_PROMOTE",
    "CUDA_FP32",
    "CUDA_FP32_SET_DTYPE",
    "CUDA_LOWER_PRECISION",
    "CUDA_PROMOTE",
]

CPU_LOWER_PRECISION = frozenset(
    """conv1d conv2d conv3d bmm mm linalg_vecdot baddbmm addmm _addmm_activation addbmm linear
    _convolution matmul conv_tbc mkldnn_rnn_layer conv_transpose1d conv_transpose2d conv_transpose3d
    prelu scaled_dot_product_attention _native_multi_head_attention""".split()
)

CPU_FP32 = frozenset(
    """avg_pool3d binary_cross_entropy grid_sampler polar prod quantile nanquantile stft cdist
    grid_sampler_2d _grid_sampler_2d_cpu_fallback grid_sampler_3d trace view_as_complex cholesky
    cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d max_unpool2d
    max_unpool3d adaptive_avg_pool3d reflection_pad1d reflection_pad2d replication_pad1d
    replication_pad2d replication_pad3d mse_loss cosine_embedding_loss nll_loss nll_loss2d
    hinge_embedding_loss poisson_nll_loss smooth_l1_loss cross_entropy_loss l1_loss huber_loss
    margin_ranking_loss soft_margin_loss triplet_margin_loss multi_margin_loss ctc_loss kl_div
    multilabel_margin_loss binary_cross_entropy_with_logits fft_fft fft_ifft fft_fft2 fft_ifft2
    fft_fftn fft_ifftn fft_rfft fft_irfft fft_rfft2 fft_irfft2 fft_rfftn fft_irfftn fft_hfft
    fft_ihfft linalg_cond linalg_matrix_rank linalg_solve linalg_cholesky linalg_svdvals
    linalg_eigvals linalg_eigvalsh linalg_inv linalg_householder_product linalg_tensorinv
    linalg_tensorsolve fake_quantize_per_tensor_affine geqrf _lu_with_info qr svd
    triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d
    multilabel_margin_loss_forward linalg_qr linalg_cholesky_ex linalg_svd linalg_eig linalg_eigh
    linalg_lstsq linalg_inv_ex""".split()
)

CPU_PROMOTE = frozenset({"stack", "cat", "index_copy"})

# CUDA (and ROCm, which shares the Autocast key): autocast_mode.h AT_FORALL_LOWER_PRECISION_FP,
# AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE and AT_FORALL_PROMOTE.
CUDA_LOWER_PRECISION = frozenset(
    """_convolution conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d
    convolution prelu addmm addmv addr matmul einsum mm mv linalg_vecdot linear addbmm baddbmm bmm
    chain_matmul linalg_multi_dot _thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell
    rnn_tanh_cell rnn_relu_cell _scaled_dot_product_flash_attention scaled_dot_product_attention
    cudnn_convolution cudnn_convolution_transpose""".split()
)

# rms_norm joined AT_FORALL_FP32 after the stored autocast_mode.h: torch 2.13 registers an
# AutocastCUDA kernel for it that casts input and weight to float32.
CUDA_FP32 = frozenset(
    """acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus
    layer_norm native_layer_norm rms_norm group_norm frobenius_norm nuclear_norm cosine_similarity
    poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss
    smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss
    triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm
    logsumexp upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d
    upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d
    _upsample_bilinear2d_aa upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa""".split()
)

CUDA_FP32_SET_DTYPE = frozenset("prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum".split())
"""Ops that run in float32 by receiving ``dtype=torch.float32`` rather than a cast input."""

CUDA_PROMOTE = frozenset("addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add".split())
