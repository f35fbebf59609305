"""torchao's weight formats through transformers' ``TorchAoConfig``: which are modelled, their layers and words.

transformers quantizes each linear weight it would load with torchao's own ``quantize_``, so the
tensor subclass (``Int8Tensor``, ``Int4Tensor``, ``Float8Tensor``) and its linear are torchao's
code run on meta. Four configs are modelled, each as torchao's defaults run it:

- ``Int8WeightOnlyConfig()`` (``int8wo``): int8 rows, float32 scale and int8 zero point per row;
  its linear casts the weight to the input's dtype, then multiplies. Any target.
- ``Int4WeightOnlyConfig()`` (``int4wo``): ``Int4Tensor`` with plain packing, mslk's format and
  CUTLASS sm90 GEMM (``tracer/kernels/torchao_int4.py``); H100/H200, bfloat16.
- ``Int4WeightOnlyConfig(int4_packing_format="tile_packed_to_4d")`` (``int4wo-tinygemm``):
  ``Int4TilePackedTo4dTensor``, torch's tinygemm format and ``_weight_int4pack_mm`` (the int4 path
  torchao documents for the A100); NVIDIA sm 8.0+ and AMD CDNA2+, bfloat16.
- ``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`` (``fp8-rowwise``): e4m3
  weights with a float32 scale per output row, each input quantized per token by torchao's torch
  path, then ``torch._scaled_mm``. NVIDIA sm 8.9+ or the cpu target (torch's CPU ``_scaled_mm``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vramsim.errors import UnsupportedError
from vramsim.estimators.devices import DeviceProfile
from vramsim.results.report import Assumption
from vramsim.workload.quiet import quiet_optional_libraries

if TYPE_CHECKING:  # torch loads when a model is quantized: the command line imports this module without it
    import torch

__all__ = [
    "TORCHAO_NAMES",
    "check_torchao",
    "describe_torchao",
    "is_torchao",
    "quantize_torchao",
    "quantize_torchao_diffusers",
    "torchao_notes",
    "torchao_quant_type",
    "uses_mslk_int4",
]

TORCHAO_NAMES = ("int8wo", "int4wo", "int4wo-tinygemm", "fp8-rowwise")
"""The ``--quantization`` names that are torchao configs."""
MSLK_INT4_CAPABILITY = 9
"""mslk's ``bf16i4bf16_rowwise`` is a CUTLASS ``Sm90`` kernel (wgmma): compute capability 9.x only."""
FLOAT8_CAPABILITY = (8, 9)
"""torchao ``float8/inference.py _check_hardware_support``: per-row float8 needs sm 8.9+ (or MI300+, XPU)."""
_KINDS = {
    "Int8WeightOnlyConfig": "int8wo",
    "Int4WeightOnlyConfig": "int4wo",
    "Float8DynamicActivationFloat8WeightConfig": "fp8-rowwise",
}
_INT4_PACKINGS = {"plain": "int4wo", "tile_packed_to_4d": "int4wo-tinygemm"}
"""``Int4WeightOnlyConfig.int4_packing_format`` -> the name of the format it makes."""

quiet_optional_libraries()


def torchao_quant_type(name: str) -> Any:
    """torchao's config for a ``TORCHAO_NAMES`` name: its defaults, but the granularity ``fp8-rowwise`` names."""
    try:
        from torchao import quantization
    except ImportError as exc:
        raise UnsupportedError(f"{name} is a torchao format: install torchao (pip install torchao)") from exc
    # set_inductor_config would retune torch._inductor.config for the whole process; a quantized run is not compiled
    # here (compile refuses quantization), so it would change nothing but later compiled runs in the same process.
    if name == "int8wo":
        return quantization.Int8WeightOnlyConfig(set_inductor_config=False)
    if name == "int4wo":
        return quantization.Int4WeightOnlyConfig(set_inductor_config=False)
    if name == "int4wo-tinygemm":
        return quantization.Int4WeightOnlyConfig(int4_packing_format="tile_packed_to_4d", set_inductor_config=False)
    return quantization.Float8DynamicActivationFloat8WeightConfig(granularity=quantization.PerRow(), set_inductor_config=False)


def is_torchao(config: Any) -> bool:
    return type(config).__name__ == "TorchAoConfig"


def uses_mslk_int4(spec: Any) -> bool:
    """Whether ``spec`` (a name or transformers' config) is torchao's ``Int4WeightOnlyConfig`` in its default,
    plain packing (mslk's format)."""
    if isinstance(spec, str):
        return spec.lower() == "int4wo"
    return is_torchao(spec) and type(spec.quant_type).__name__ in _KINDS and _kind(spec) == "int4wo"


def check_torchao(config: Any, profile: DeviceProfile, *, train: bool) -> None:
    """Refuse torchao configs, options and targets not modelled, in one line each."""
    name = type(config.quant_type).__name__
    kind = _KINDS.get(name)
    if kind is None:
        raise UnsupportedError(
            f"torchao's {name} is not modelled; Int8WeightOnlyConfig (int8wo), Int4WeightOnlyConfig "
            "(int4wo, int4wo-tinygemm) and Float8DynamicActivationFloat8WeightConfig per row "
            "(fp8-rowwise) are"
        )
    if train:
        raise UnsupportedError(f"training on a torchao {_kind(config)} base is not modelled: simulate --task forward or generate")
    quant_type, capability = config.quant_type, profile.compute_capability
    if kind == "int4wo":
        packing = _value(quant_type.int4_packing_format)
        if packing not in _INT4_PACKINGS:
            raise UnsupportedError(
                f"torchao Int4WeightOnlyConfig(int4_packing_format={packing!r}) is not modelled; plain "
                "(int4wo, mslk's kernels) and tile_packed_to_4d (int4wo-tinygemm) are"
            )
        if packing == "plain" and (profile.vendor != "nvidia" or capability is None or capability[0] != MSLK_INT4_CAPABILITY):
            raise UnsupportedError(
                f"int4wo's matmul is mslk's CUTLASS sm90 kernel (Int4Tensor): simulate an H100 or H200, "
                f"not {profile.label}, or int4wo-tinygemm (torch's tinygemm, sm 8.0+)"
            )
        from vramsim.tracer.kernels.torchao_int4 import TINYGEMM_CAPABILITY  # imports torch, as torchao's config did

        tinygemm_gpu = profile.vendor == "amd" or (profile.vendor == "nvidia" and (capability or (0, 0)) >= TINYGEMM_CAPABILITY)
        if packing == "tile_packed_to_4d" and not tinygemm_gpu:
            raise UnsupportedError(
                f"int4wo-tinygemm's matmul is torch's tinygemm (_weight_int4pack_mm), built for NVIDIA "
                f"sm 8.0+ and AMD CDNA2+: {profile.label} has none"
            )
    elif kind == "fp8-rowwise":
        _check_float8(quant_type, profile)


def _check_float8(quant_type: Any, profile: DeviceProfile) -> None:
    from torchao.quantization import PerRow

    per_row = all(isinstance(g, PerRow) and g.dim in (-1, 1) for g in quant_type.granularity)
    e4m3 = str(quant_type.weight_dtype) == str(quant_type.activation_dtype) == "torch.float8_e4m3fn"
    packing = _value(quant_type.packing_format)
    problems = [
        "" if per_row else "granularity other than PerRow() (modelled: per row)",
        "kernel_preference=MSLK (modelled: auto or torch, torchao's torch path)"
        if _value(quant_type.kernel_preference) == "mslk"
        else "",
        "" if packing == "plain" else f"packing_format={packing!r}",
        "" if e4m3 else "float8 other than e4m3",
    ]
    found = [p for p in problems if p]
    if found:
        raise UnsupportedError(f"torchao Float8DynamicActivationFloat8WeightConfig with {'; '.join(found)} is not modelled")
    capability = profile.compute_capability
    if profile.vendor != "cpu" and (profile.vendor != "nvidia" or capability is None or capability < FLOAT8_CAPABILITY):
        raise UnsupportedError(
            f"torchao's float8 needs an NVIDIA GPU of compute capability 8.9+ (Ada, Hopper, Blackwell); "
            f"{profile.label} has no float8 matmul"
        )


def _refuse_int4_off_cuda(model: torch.nn.Module, config: Any, device: str) -> None:
    import torch

    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    kind = _kind(config)
    if kind.startswith("int4wo") and (device == "cpu" or dtype != torch.bfloat16):
        raise UnsupportedError(
            f"{kind} (torchao's int4 weight-only) runs on a GPU only, in bfloat16 (its kernels): give dtype=bf16 and a GPU target"
        )


def quantize_torchao(model: torch.nn.Module, config: Any, device: str) -> None:
    """transformers' torchao path: its quantizer's skip list (the head), then torchao's own ``quantize_``
    on each linear weight it would quantize while loading (``TorchAoQuantize``), leaving torchao's
    tensor subclass, whose inner tensors (``qdata``, scales, zero points) hold the memory."""
    import torch
    from torchao.quantization import quantize_
    from transformers.quantizers.auto import AutoHfQuantizer

    from vramsim.tracer.patches import torchao_float8_hardware_checked, torchao_tinygemm_capability_checked

    _refuse_int4_off_cuda(model, config, device)
    quantizer = AutoHfQuantizer.from_config(config, pre_quantized=False)
    quantizer.preprocess_model(model, device_map={"": device})
    with torchao_float8_hardware_checked(), torchao_tinygemm_capability_checked():  # check_torchao checked the target
        for name, module in list(model.named_modules()):
            if isinstance(module, torch.nn.Linear) and quantizer.param_needs_quantization(model, f"{name}.weight"):
                quantize_(module, config.get_apply_tensor_subclass())
    quantizer.postprocess_model(model)


def quantize_torchao_diffusers(model: torch.nn.Module, config: Any, device: str) -> None:
    """diffusers' torchao path (``ModelMixin.from_pretrained(..., quantization_config=TorchAoConfig(...))``): its
    quantizer's skip list (``modules_to_not_convert``, the model's ``_keep_in_fp32_modules``), then torchao's
    ``quantize_`` on each linear weight ``check_if_quantized_param`` takes, as ``create_quantized_param`` does."""
    import torch
    from diffusers.quantizers import DiffusersAutoQuantizer
    from diffusers.quantizers.quantization_config import TorchAoConfig
    from torchao.quantization import quantize_

    from vramsim.tracer.patches import torchao_float8_hardware_checked, torchao_tinygemm_capability_checked

    _refuse_int4_off_cuda(model, config, device)
    quantizer = DiffusersAutoQuantizer.from_config(TorchAoConfig(quant_type=config.quant_type), pre_quantized=False)
    quantizer.preprocess_model(
        model=model, device_map={"": device}, keep_in_fp32_modules=getattr(model, "_keep_in_fp32_modules", None) or []
    )
    with torchao_float8_hardware_checked(), torchao_tinygemm_capability_checked():
        for name, module in list(model.named_modules()):
            if isinstance(module, torch.nn.Linear) and quantizer.check_if_quantized_param(
                model, module.weight, f"{name}.weight", {}
            ):
                quantize_(module, quantizer.quantization_config.get_apply_tensor_subclass())


def describe_torchao(config: Any) -> str:
    """The header's words for a torchao model."""
    quant_type, kind = config.quant_type, _kind(config)
    if kind == "int4wo":
        return (
            f"torchao int4 weight-only (Int4Tensor, plain: two int4 per byte, scales and zero points per group of "
            f"{quant_type.group_size} in bf16)"
        )
    if kind == "int4wo-tinygemm":
        return (
            f"torchao int4 weight-only (Int4TilePackedTo4dTensor, tinygemm's tiles: in features padded to 1024, "
            f"bf16 scale and zero point per group of {quant_type.group_size})"
        )
    if kind == "fp8-rowwise":
        return "torchao float8 per row (e4m3 weights, a float32 scale per row; inputs quantized per token)"
    return f"torchao int8 weight-only ({type(quant_type.granularity).__name__}: int8 values, float32 scales)"


def torchao_notes(config: Any) -> list[Assumption]:
    """What a torchao run assumed beyond torchao's own code."""
    from vramsim.estimators.assumptions import QUANTIZED_KERNELS

    kind = _kind(config)
    detail = {
        "int8wo": "traced as torchao writes it; torch.compile, which would fuse the cast, is not modelled",
        "int4wo": "mslk's quantization helpers and GEMM stood in on meta (their outputs; the GEMM's CUTLASS workspace "
        "is 0 bytes for its persistent non-split-K schedules)",
        "int4wo-tinygemm": "torch's _weight_int4pack_mm shaped on meta as int4mm.cu allocates (its bf16 output only)",
        "fp8-rowwise": "torchao's torch path (KernelPreference.TORCH, or AUTO without mslk installed; with mslk on "
        "sm 9.0+ AUTO quantizes inputs in one Triton kernel instead, not modelled)",
    }[kind]
    return [Assumption(name=f"torchao_{kind.replace('-', '_')}", detail=f"{QUANTIZED_KERNELS[kind]}; {detail}")]


def _value(option: Any) -> Any:
    """A torchao option given as its str enum or as the plain string."""
    return getattr(option, "value", option)


def _kind(config: Any) -> str:
    """``config``'s name in ``TORCHAO_NAMES`` (an int4 config by its packing; one not modelled reads as ``int4wo``)."""
    kind = _KINDS[type(config.quant_type).__name__]
    if kind == "int4wo":
        return _INT4_PACKINGS.get(_value(config.quant_type.int4_packing_format), kind)
    return kind
