"""Which of optimum-quanto's int4/int2 weight tensors a target gets: ``WeightQBitsTensor.create``, per target.

quanto's ``create`` (``tensor/weights/qbits.py``) picks the subclass by the device the weight is quantized on,
which meta cannot stand for; here the target answers its questions:

- ``AWQWeightQBitsTensor``: int4, fp16 scales, groups of 128, 128+ output rows, a CUDA device of
  compute capability 8.0+ (quanto's CUDA build, ``gemm_f16i4_awq``). Its tensors assert a CUDA device and
  its kernel exists only in that build: refused (``check_quanto_packing``).
- ``TinyGemmWeightQBitsTensor``: int4, bf16 scales, groups of 128, on the CPU or a CUDA 12.1+ device of
  8.0+. uint8 [N, K / 2] (CPU) or int32 tiles (CUDA's ``_convert_weight_to_int4pack``), scales and shifts in
  one bf16 [K / 128, N, 2] tensor; each linear is one ``_weight_int4pack_mm`` (``_for_cpu``), its output only.
- ``WeightQBitsTensor`` otherwise (int2 always; fp32 and fp16 scales but AWQ's; other group sizes; AMD,
  whose ROCm torch has no ``torch.version.cuda``): a uint8 ``PackedTensor`` of the grouped values
  (2 or 4 a byte), scales and shifts per group in the weights' dtype; each linear dequantizes the whole
  weight (quanto's ``unpack``, scale, shift) and multiplies.

The tensors are quanto's own classes built by quanto's code on meta, but for TinyGemm's CPU branches
(``tracer/kernels/quanto_cpu.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from vramsim.errors import UnsupportedError
from vramsim.estimators.devices import DeviceProfile

if TYPE_CHECKING:  # torch loads when a model is quantized
    import torch

__all__ = [
    "QUANTO_AWQ_MIN_ROWS",
    "QUANTO_FOLLOWED_RELEASE",
    "QUANTO_KERNEL_CAPABILITY",
    "QUANTO_KERNEL_GROUP",
    "QuantoPacking",
    "check_quanto_packing",
    "create_for",
    "packing_for",
]

QUANTO_FOLLOWED_RELEASE = (0, 2, 7)
"""The optimum-quanto release whose ``create`` and TinyGemm CPU branches these rules follow; older ones are refused."""
QUANTO_KERNEL_CAPABILITY = (8, 0)
"""``create``: AWQ and TinyGemm on CUDA need ``torch.cuda.get_device_capability()[0] >= 8``. TinyGemm's
also needs ``torch.version.cuda`` 12.1+, assumed of the target's torch build."""
QUANTO_KERNEL_GROUP = 128
"""``create``: both kernels need ``group_size == 128``, QModuleMixin's group (lowered by 32 until it divides
the in features, None up to 128 of them)."""
QUANTO_AWQ_MIN_ROWS = 128
"""``create``: AWQ needs ``size[0] >= 128`` output rows (quanto's workaround of an AWQ GEMM crash)."""


class QuantoPacking(StrEnum):
    """quanto's int4/int2 weight tensors, each by its class name (the value the notes print).

    - PLAIN: kernel-agnostic ``PackedTensor``, dequantized whole by each linear.
    - TINYGEMM: torch's tinygemm int4 layout and matmul.
    - AWQ: quanto's AWQ v2 int16 layout and CUDA GEMM.
    """

    PLAIN = "WeightQBitsTensor"
    TINYGEMM = "TinyGemmWeightQBitsTensor"
    AWQ = "AWQWeightQBitsTensor"


def _sm80(profile: DeviceProfile) -> bool:
    return profile.vendor == "nvidia" and (profile.compute_capability or (0, 0)) >= QUANTO_KERNEL_CAPABILITY


def packing_for(
    profile: DeviceProfile, *, bits: int, dtype: torch.dtype, size: tuple[int, ...], group_size: int | None
) -> QuantoPacking:
    """``create``'s choice for a weight of ``size`` quantized on ``profile`` (QLinear's axis is always 0)."""
    import torch

    kernels = bits == 4 and group_size == QUANTO_KERNEL_GROUP and len(size) == 2
    if kernels and dtype == torch.float16 and size[0] >= QUANTO_AWQ_MIN_ROWS and _sm80(profile):
        return QuantoPacking.AWQ
    if kernels and dtype == torch.bfloat16 and (profile.vendor == "cpu" or _sm80(profile)):
        return QuantoPacking.TINYGEMM
    return QuantoPacking.PLAIN


def check_quanto_packing(bits: int, profile: DeviceProfile, dtype: torch.dtype) -> None:
    """Refuse, in one line, a quanto older than the rules followed here, and the AWQ path, which cannot be built on meta."""
    from importlib.metadata import version

    import torch
    from packaging.version import Version

    installed = version("optimum-quanto")
    if Version(installed).release[:3] < QUANTO_FOLLOWED_RELEASE:
        raise UnsupportedError(
            f"quanto int{bits} is modelled as optimum-quanto 0.2.7 packs it, not {installed}: pip install -U optimum-quanto"
        )

    if bits == 4 and dtype == torch.float16 and _sm80(profile):
        raise UnsupportedError(
            f"quanto int4 in fp16 on {profile.label} (sm 8.0+) packs for quanto's AWQ kernel (AWQWeightQBitsTensor, "
            "gemm_f16i4_awq), which vramsim does not model; give dtype=bf16 (TinyGemm) or fp32"
        )


def create_for(profile: DeviceProfile) -> Any:
    """``WeightQBitsTensor.create`` as it runs on ``profile``'s device: the same branches, the target's answers
    (AWQ's refused first by ``check_quanto_packing``)."""
    from optimum.quanto.tensor.packed import PackedTensor
    from optimum.quanto.tensor.weights.qbits import WeightQBitsTensor
    from optimum.quanto.tensor.weights.tinygemm import TinyGemmWeightQBitsTensor

    def create(
        qtype: Any,
        axis: int,
        group_size: int | None,
        size: Any,
        stride: Any,
        data: Any,
        scale: Any,
        shift: Any,
        requires_grad: bool = False,
    ) -> Any:
        packing = packing_for(profile, bits=qtype.bits, dtype=scale.dtype, size=tuple(size), group_size=group_size)
        if packing is QuantoPacking.TINYGEMM:
            data = data.unpack() if type(data) is PackedTensor else data
            return TinyGemmWeightQBitsTensor(qtype, axis, group_size, size, stride, data, (scale, shift), requires_grad)
        return WeightQBitsTensor(qtype, axis, group_size, size, stride, data, scale, shift, requires_grad)

    return create
