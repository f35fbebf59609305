"""optimum-quanto's int4/int2 weights on the cpu target, built and multiplied on meta as on a CPU.

``TinyGemmPackedTensor.pack`` and ``TinyGemmQBitsLinearFunction.forward`` (quanto
``tensor/weights/tinygemm/``) branch on the tensor's device: a CPU tensor is packed by
``torch._convert_weight_to_int4pack_for_cpu`` (uint8 [N, K / 2]) and multiplied by
``torch._weight_int4pack_mm_for_cpu``; any other device takes the CUDA branch. Meta would take the CUDA
one, so for the cpu target these two are quanto's CPU branches, line for line; torch's Meta kernels
shape both ops (the matmul makes its [M, N] output and nothing else).

A plain ``WeightQBitsTensor`` is dequantized through ``torch.ops.quanto.unpack``, one op to the tracer (its
output only, all that quanto's CUDA kernel allocates); on a CPU it is quanto's C++ extension
(``library/extensions/cpp/unpack.cpp``), whose ATen ops ``unpack_cpu`` repeats with their temporaries.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["INNER_K_TILES", "tinygemm_forward_for_cpu", "tinygemm_pack_for_cpu", "unpack_cpu"]

INNER_K_TILES = 2
"""quanto ``TinyGemmPackedTensor.pack``: ``inner_ktiles = 2``."""


def tinygemm_pack_for_cpu(t: torch.Tensor) -> Any:
    """``TinyGemmPackedTensor.pack``'s CPU branch: the uint8 values as int32, then torch's CPU int4 packing."""
    from optimum.quanto.tensor.weights.tinygemm.packed import TinyGemmPackedTensor

    t = t.to(torch.int32).contiguous()  # (N, K)
    data = torch._convert_weight_to_int4pack_for_cpu(t, innerKTiles=INNER_K_TILES)  # uint8 (N, K / 2)
    return TinyGemmPackedTensor(data, t.size(), t.stride())


def tinygemm_forward_for_cpu(ctx: Any, input: torch.Tensor, other: Any, bias: torch.Tensor | None) -> torch.Tensor:
    """``TinyGemmQBitsLinearFunction.forward``'s CPU branch: one ``_weight_int4pack_mm_for_cpu``, then the bias."""
    ctx.save_for_backward(input, other)
    in_features = input.shape[-1]
    output_shape = (*input.shape[:-1], other.shape[0])
    output = torch._weight_int4pack_mm_for_cpu(
        input.reshape(-1, in_features), other._data._data, other._group_size, other._scale_shift
    )
    output = output.reshape(output_shape)
    return output if bias is None else output + bias


def unpack_cpu(t: torch.Tensor, bits: int) -> torch.Tensor:
    """``unpack.cpp``: ``cat({t & 0x0F, (t & 0xF0) >> 4})`` (2 bits: four masks, shifts by 2, 4, 6); every
    masked and shifted temporary lives until the ``cat`` returns, as C++ keeps a full expression's temporaries."""
    masks = {4: (0x0F, 0xF0), 2: (0x03, 0x0C, 0x30, 0xC0)}[bits]
    temporaries = []
    for i, mask in enumerate(masks):
        temporaries.append(t & mask)
        if i:
            temporaries.append(temporaries[-1] >> (bits * i))
    return torch.cat([temporaries[0], *temporaries[2::2]], 0)  # (values per byte x rows, ...) uint8
