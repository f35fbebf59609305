"""Peak dense throughput of the catalog's GPUs, per dtype: what a job's duration is divided by.

Each row is the vendor's datasheet figure in TFLOPS, **dense** (the 2:4 structured-sparsity figures the
datasheets headline are twice these; no training step is sparse). ``float16`` and ``bfloat16`` are the
tensor-core (AMD: matrix-core) rates. On GeForce cards these are the rates with FP32 accumulate, which is what
PyTorch's half-precision matmuls use (cuBLAS's default compute type); the FP16-accumulate rate printed beside it
is twice as high. ``float32`` is the plain FP32 (vector) rate, what a float32 matmul runs at with PyTorch's
default ``torch.backends.cuda.matmul.allow_tf32 = False``. ``None``: the card has no native rate for that dtype
(Volta and Turing have no bf16). Cards missing here (A10G, most GeForce cards) have no vendor figure at hand: a
price sheet gives its own ``peak_tflops`` for them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PEAK_TFLOPS", "PeakThroughput"]


@dataclass(frozen=True, slots=True)
class PeakThroughput:
    """One card's dense peaks (TFLOPS) and the datasheet they come from."""

    float32: float
    float16: float | None
    bfloat16: float | None
    source: str


def _sheet(fp32: float, half: float, source: str, *, bf16: bool = True) -> PeakThroughput:
    """A card whose fp16 and bf16 tensor rates are the same (all since Ampere), or that has no bf16."""
    return PeakThroughput(fp32, half, half if bf16 else None, source)


_A100 = _sheet(19.5, 312, "NVIDIA A100 Tensor Core GPU datasheet (BF16/FP16 624 with sparsity)")
_H100_SXM = "NVIDIA H100 Tensor Core GPU datasheet, SXM (BF16/FP16 1,979 with sparsity)"

PEAK_TFLOPS: dict[str, PeakThroughput] = {
    "v100-16gb": _sheet(15.7, 125, "NVIDIA V100 datasheet, SXM2 (tensor FP16 125)", bf16=False),
    "v100-32gb": _sheet(15.7, 125, "NVIDIA V100 datasheet, SXM2 (tensor FP16 125)", bf16=False),
    "t4": _sheet(8.1, 65, "NVIDIA T4 datasheet (mixed-precision FP16/FP32 65)", bf16=False),
    "a10": _sheet(31.2, 125, "NVIDIA A10 datasheet (BF16/FP16 250 with sparsity)"),
    "a30": _sheet(10.3, 165, "NVIDIA A30 datasheet (BF16/FP16 330 with sparsity)"),
    "a40": _sheet(37.4, 149.7, "NVIDIA A40 datasheet (BF16/FP16 299.4 with sparsity)"),
    "a100-40gb": _A100,
    "a100-40gb-pcie": _A100,
    "a100-80gb": _A100,
    "a100-80gb-pcie": _A100,
    "l4": _sheet(30.3, 121, "NVIDIA L4 datasheet (BF16/FP16 242 with sparsity)"),
    "l40": _sheet(90.5, 181.05, "NVIDIA L40 datasheet (BF16/FP16 362.1 with sparsity)"),
    "l40s": _sheet(
        91.6, 362.05, "NVIDIA L40S datasheet: BF16/FP16 362.05 dense as printed (its sparse figure, 733, is not twice it)"
    ),
    "h20": _sheet(44, 148, "NVIDIA H20 specifications (BF16/FP16 148, FP8 296)"),
    "h100-pcie": _sheet(51, 756, "NVIDIA H100 Tensor Core GPU datasheet, PCIe (BF16/FP16 1,513 with sparsity)"),
    "h100-sxm": _sheet(67, 989.5, _H100_SXM),
    "h100-nvl": _sheet(60, 835.5, "NVIDIA H100 Tensor Core GPU datasheet, NVL (BF16/FP16 1,671 with sparsity)"),
    "gh200": _sheet(67, 989.5, "NVIDIA GH200 Grace Hopper Superchip datasheet (BF16/FP16 1,979 with sparsity)"),
    "h200": _sheet(67, 989.5, "NVIDIA H200 Tensor Core GPU datasheet, SXM (BF16/FP16 1,979 with sparsity)"),
    "h200-nvl": _sheet(60, 835.5, "NVIDIA H200 Tensor Core GPU datasheet, NVL (BF16/FP16 1,671 with sparsity)"),
    "b200": _sheet(75, 2250, "NVIDIA HGX B200 datasheet, per GPU (FP16/BF16 4.5 PFLOPS with sparsity)"),
    "gb200": _sheet(80, 2500, "NVIDIA GB200 NVL72 datasheet, per GPU (FP16/BF16 5 PFLOPS with sparsity)"),
    "rtx-a6000": _sheet(38.7, 154.8, "NVIDIA RTX A6000 datasheet (tensor 309.7 with sparsity)"),
    "rtx-6000-ada": _sheet(91.1, 364.25, "NVIDIA RTX 6000 Ada datasheet (tensor FP8 1,457 with sparsity, FP16 a quarter)"),
    "rtx-3090": _sheet(35.6, 71, "NVIDIA Ampere GA102 whitepaper, RTX 3090: FP16 tensor with FP32 accumulate"),
    "rtx-4090": _sheet(82.6, 165.2, "NVIDIA Ada Lovelace whitepaper, RTX 4090: FP16 tensor with FP32 accumulate"),
    "rtx-5090": _sheet(104.8, 209.5, "NVIDIA RTX Blackwell whitepaper, RTX 5090: FP16 tensor with FP32 accumulate"),
    "mi210": _sheet(22.6, 181, "AMD Instinct MI210 specifications (FP32 vector; FP16/BF16 matrix)"),
    "mi250x": _sheet(23.95, 191.5, "AMD Instinct MI250X specifications, halved: one GCD of the card's 47.9 / 383"),
    "mi300x": _sheet(163.4, 1307.4, "AMD Instinct MI300X datasheet (FP16/BF16 2,614.9 with sparsity)"),
    "mi325x": _sheet(163.4, 1307.4, "AMD Instinct MI325X datasheet (FP16/BF16 2,614.9 with sparsity)"),
    "mi355x": _sheet(157.3, 2516.6, "AMD Instinct MI355X specifications (FP16/BF16 5,033.2 with sparsity)"),
}
"""Catalog key (``estimators/devices.py``) -> its dense peaks; the keys are a subset of the catalog's."""
