"""transformers' fine-grained FP8 matmul (``FineGrainedFP8Config``) as a CUDA GPU runs it, on meta.

``FP8Linear.forward`` calls ``integrations/finegrained_fp8.py fp8_linear``, which hands the
input to a kernel fetched from the Hub at run time: DeepGEMM (Hopper and Blackwell, 128x128
blocks, ``deepgemm_fp8_fp4_linear``) or the Triton ``kernels-community/finegrained-fp8`` kernel
(``matmul_2d``). Both quantize the activations before the GEMM: DeepGEMM's
``per_token_cast_to_fp8`` and the Triton kernel's ``fp8_act_quant`` write the input in
``float8_e4m3fn`` [M, K] with one float32 scale per token and block of ``block_size[1]`` columns
[M, ceil(K / block)]; a static ``activation_scale`` keeps its one scale. The GEMM then writes
[M, N] in the input's dtype, and the bias is added in place.

``fp8_linear`` below stands in for transformers' function while a simulation runs
(``patches.fp8_kernels_on_meta``): the two ops it calls, ``vramsim::fp8_act_quant`` and
``vramsim::fp8_gemm``, make those tensors on meta. Backward (LoRA on an FP8 base) is
transformers' own ``FP8LinearFunction.backward``: the weight dequantized in the gradient's dtype.
"""

from __future__ import annotations

import math

import torch

__all__ = ["NOTE_FP8_LINEAR", "fp8_linear"]

NOTE_FP8_LINEAR = (
    "the input's float8 copy and scales (DeepGEMM's per_token_cast_to_fp8, Triton's fp8_act_quant) are counted, "
    "kernel-internal scratch (DeepGEMM's TMA-aligned scale copy) is not"
)


@torch.library.custom_op("vramsim::fp8_act_quant", mutates_args=())
def fp8_act_quant(x: torch.Tensor, group: int, dynamic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group FP8 quantization of a 2-D input: the float8 values and their float32 scales."""
    raise NotImplementedError("vramsim::fp8_act_quant stands for a CUDA kernel and runs on meta only")


@fp8_act_quant.register_fake
def _fp8_act_quant_fake(x: torch.Tensor, group: int, dynamic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    values = x.new_empty(x.shape, dtype=torch.float8_e4m3fn)  # [M, K]
    scales = x.new_empty((x.shape[0], math.ceil(x.shape[1] / group)) if dynamic else (0,), dtype=torch.float32)
    return values, scales


@torch.library.custom_op("vramsim::fp8_gemm", mutates_args=())
def fp8_gemm(
    values: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, weight_scale_inv: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    """The block-scaled FP8 GEMM: [M, K] x [N, K]^T -> [M, N] in ``out_dtype``."""
    raise NotImplementedError("vramsim::fp8_gemm stands for a CUDA kernel and runs on meta only")


@fp8_gemm.register_fake
def _fp8_gemm_fake(
    values: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, weight_scale_inv: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    return values.new_empty((values.shape[0], weight.shape[0]), dtype=out_dtype)


def fp8_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    weight_scale_inv: torch.Tensor,
    block_size: list[int] | None = None,
    bias: torch.Tensor | None = None,
    activation_scale: torch.Tensor | None = None,
    allow_deepgemm: bool = True,
) -> torch.Tensor:
    """transformers' ``fp8_linear`` signature: activation quantization, GEMM, bias in place."""
    rows = input.reshape(-1, input.shape[-1])
    group = block_size[1] if block_size is not None else input.shape[-1]
    values, scales = torch.ops.vramsim.fp8_act_quant(rows, group, activation_scale is None)
    output = torch.ops.vramsim.fp8_gemm(values, scales, weight, weight_scale_inv, input.dtype)
    del values, scales
    output = output.view(*input.shape[:-1], weight.shape[0])
    if bias is not None:
        output.add_(bias)
    return output
