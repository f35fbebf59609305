"""quanto's CPU paths as traced on meta do what quanto's CPU code does: the same values, the same ops."""

from __future__ import annotations

import pytest
import torch

from vramsim.tracer.kernels.quanto_cpu import tinygemm_pack_for_cpu, unpack_cpu

quanto = pytest.importorskip("optimum.quanto")


@pytest.mark.parametrize("bits", [2, 4])
def test_unpack_cpu_matches_quantos_cpp_extension(bits: int) -> None:
    """unpack.cpp's masks and shifts, run as ATen ops: the extension's own result on a CPU tensor."""
    packed = torch.randint(0, 256, (96, 40), dtype=torch.uint8)
    assert torch.equal(unpack_cpu(packed, bits), torch.ops.quanto.unpack(packed, bits))


def test_tinygemm_pack_for_cpu_is_quantos_cpu_packing() -> None:
    """TinyGemmPackedTensor.pack on a CPU tensor: the same uint8 [N, K / 2] as the CPU branch taken on meta."""
    from optimum.quanto.tensor.weights.tinygemm.packed import TinyGemmPackedTensor

    values = torch.randint(0, 16, (64, 256), dtype=torch.uint8)
    real, traced = TinyGemmPackedTensor.pack(values), tinygemm_pack_for_cpu(values.to("meta"))
    assert (real._data.shape, real._data.dtype) == (traced._data.shape, traced._data.dtype) == ((64, 128), torch.uint8)
