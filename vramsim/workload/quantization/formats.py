"""GPTQ, AWQ and fine-grained FP8 weights: what each needs of the target, its layers, its words and notes.

``quantization.py`` hands these formats here (bitsandbytes stays there). Each is modelled for the
kernel an NVIDIA GPU runs: gptqmodel's Marlin for GPTQ and AWQ (``marlin_linear.py``), transformers'
``FP8Linear`` over DeepGEMM or the Triton finegrained-fp8 kernel for FP8 (``tracer/kernels/fp8_linear.py``);
torchao's configs go to ``torchao_formats.py``. Anything else (another kernel, the cpu target, training a
GPTQ/AWQ base) is refused in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vramsim.errors import UnsupportedError
from vramsim.estimators.devices import DeviceProfile, get_device
from vramsim.results.report import Assumption
from vramsim.workload.quantization.torchao import check_torchao, describe_torchao, is_torchao, quantize_torchao, torchao_notes

if TYPE_CHECKING:  # torch loads when a model is quantized: the command line imports this module without it
    import torch

__all__ = ["check_format_target", "describe_format", "format_notes", "quantize_format"]

MARLIN_GPTQ_CAPABILITY = (7, 5)
"""gptqmodel ``MarlinLinear.validate_device`` (``_marlin_capability_supported``): sm 7.5 and newer."""
MARLIN_AWQ_CAPABILITY = (8, 0)
"""gptqmodel ``AwqMarlinLinear.validate_device``: sm 8.0 and newer."""
MARLIN_BITS = (4, 8)
TRAINING_LAYERS = {"gptq": "gptqmodel TritonV2QuantLinear", "awq": "gptqmodel AwqGEMMLinear"}
"""The layers a LoRA run on a GPTQ/AWQ base is simulated with (``quantized_training.py``)."""
TRAINING_GPTQ_BITS = (2, 4, 8)
"""``TritonV2QuantLinear.SUPPORTS_BITS`` (gptqmodel 7.7 tritonv2.py): the GPTQ widths its dequant kernel takes."""
MARLIN_GROUP_SIZES = (-1, 32, 64, 128)
"""``SUPPORTS_BITS`` and ``SUPPORTS_GROUP_SIZE`` of both Marlin layers."""
FP8_CAPABILITY = (8, 9)
"""transformers' ``FineGrainedFP8HfQuantizer.validate_environment``: below sm 8.9 it dequantizes to bf16."""
_AUTO_BACKENDS = (None, "auto", "marlin", "gptq_marlin", "awq_marlin")


def check_format_target(config: Any, *, target: str, train: bool, lora: bool) -> None:
    """Refuse what is not modelled: a target without the format's kernel, and training but LoRA on FP8."""
    profile = get_device(target)
    if _is_fp8(config):
        _check_fp8(config, profile, train=train, lora=lora)
        return
    if is_torchao(config):
        check_torchao(config, profile, train=train)
        return
    method = _method(config)
    name = method.upper()
    if train:
        _check_training(config, method, profile, lora=lora)
        return
    needed = MARLIN_GPTQ_CAPABILITY if method == "gptq" else MARLIN_AWQ_CAPABILITY
    capability = profile.compute_capability
    if profile.vendor != "nvidia" or capability is None or capability < needed:
        raise UnsupportedError(
            f"{name} is modelled with gptqmodel's Marlin kernel, which needs an NVIDIA GPU of compute "
            f"capability {needed[0]}.{needed[1]}+; {profile.label} runs other kernels"
        )
    backend = getattr(config, "backend", None)
    backend = getattr(backend, "value", backend)
    problems = [
        f"bits={config.bits} (Marlin: 4 or 8)" if config.bits not in MARLIN_BITS else "",
        f"group_size={config.group_size} (Marlin: -1, 32, 64, 128)" if config.group_size not in MARLIN_GROUP_SIZES else "",
        f"backend={backend!r} (modelled: auto, which picks Marlin)" if backend not in _AUTO_BACKENDS else "",
        "sym=False (gptqmodel runs ExLlamaV2 for it)" if method == "gptq" and not config.sym else "",
        f"version={_awq_version(config)!r} (Marlin takes the gemm format)"
        if method == "awq" and _awq_version(config) != "gemm"
        else "",
    ]
    found = [p for p in problems if p]
    if found:
        raise UnsupportedError(f"{name} with {'; '.join(found)} is not modelled")


def quantize_format(model: torch.nn.Module, config: Any, *, device: str, target: str, train: bool = False) -> None:
    """Swap ``model``'s layers for the format's as loading a quantized checkpoint leaves them: on meta,
    or (torchao, whose code runs on any device) on ``device`` for real, as ``validate`` measures. ``train``:
    GPTQ/AWQ layers of the kernels that train (``quantized_training.py``), not Marlin's."""
    import torch

    from vramsim.workload.quantization.marlin import MarlinFormat, swap_marlin_layers

    if is_torchao(config):
        quantize_torchao(model, config, device)
        return
    if device != "meta":
        raise UnsupportedError(f"{describe_format(config)}: only simulated (its kernels do not run on this machine)")
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    if _is_fp8(config):
        _swap_fp8(model, config, dtype)
        return
    if dtype not in (torch.float16, torch.bfloat16):
        given = str(dtype).removeprefix("torch.")
        raise UnsupportedError(f"gptqmodel's Marlin kernel computes in float16 or bfloat16, not {given}: give dtype=fp16 or bf16")
    method = _method(config)
    # MarlinLinear drops act order with one group per column: every input then shares its scale
    act_order = method == "gptq" and bool(config.desc_act) and config.group_size != -1
    fmt = MarlinFormat(method, config.bits, config.group_size, desc_act=act_order)
    skip: list[str] = []
    if method == "awq":
        from transformers.quantizers.auto import AutoHfQuantizer

        quantizer = AutoHfQuantizer.from_config(config, pre_quantized=True)
        skip = quantizer.get_modules_to_not_convert(
            model, config.modules_to_not_convert, model._keep_in_fp32_modules, add_default_skips=True
        )
    if train:
        from vramsim.workload.quantization.training import swap_training_layers

        swap_training_layers(model, fmt, skip)
        _mark_quantized(model, config)
        return
    sms = get_device(target).multiprocessors
    assert sms is not None, "check_format_target admits NVIDIA GPUs only"
    swap_marlin_layers(model, fmt, skip, sms=sms)
    _mark_quantized(model, config)


def describe_format(config: Any, *, training: bool = False) -> str:
    """The header's words for a GPTQ, AWQ, FP8 or torchao model."""
    if is_torchao(config):
        return describe_torchao(config)
    if _is_fp8(config):
        block = config.weight_block_size
        scales = f"{block[0]}x{block[1]} block scales" if block else "one scale per tensor"
        return f"FP8 e4m3 weights, {scales}, {config.activation_scheme} activation scales"
    act_order = ", act order" if _method(config) == "gptq" and config.desc_act and config.group_size != -1 else ""
    kernel = TRAINING_LAYERS[_method(config)] + " (training)" if training else "gptqmodel Marlin kernel"
    return f"{_method(config).upper()} {config.bits}-bit, group {config.group_size}{act_order}, {kernel}"


def format_notes(config: Any, *, train: bool = False) -> list[Assumption]:
    """What a GPTQ, AWQ or FP8 run assumed beyond the formats' own layouts."""
    from vramsim.estimators.assumptions import QUANTIZED_KERNELS, QUANTIZED_TRAINING_KERNELS
    from vramsim.tracer.kernels.fp8_linear import NOTE_FP8_LINEAR

    if _is_fp8(config):
        return [Assumption(name="fp8_activation_quant", detail=f"{QUANTIZED_KERNELS['fp8']}; {NOTE_FP8_LINEAR}")]
    if is_torchao(config):
        return torchao_notes(config)
    if train:
        return [Assumption(name="training_kernel", detail=QUANTIZED_TRAINING_KERNELS[_method(config)])]
    return [
        Assumption(
            name="marlin_kernel",
            detail=(
                f"{QUANTIZED_KERNELS[_method(config)]}, gptqmodel's automatic choice on NVIDIA GPUs (estimators/assumptions.py "
                "QUANTIZED_KERNELS): layers as after its post_init (repacked qweight, scales, a per-layer int32 workspace of "
                "max(SMs, 128)); each matmul allocates its output and an fp32 reduce buffer of SMs x min(rows rounded up to "
                "16, 64) x 256 floats"
            ),
        )
    ]


def _check_training(config: Any, method: str, profile: DeviceProfile, *, lora: bool) -> None:
    """A GPTQ/AWQ base trains LoRA adapters through gptqmodel's trainable CUDA layers
    (vramsim/workload/quantization/training.py)."""
    name = method.upper()
    if not lora:
        raise UnsupportedError(
            f"a {name} base stays frozen (packed integer weights have no gradient): train LoRA "
            "adapters on it (--lora-rank) or simulate --task forward"
        )
    if profile.vendor != "nvidia":
        raise UnsupportedError(
            f"training on a {name} base runs gptqmodel's CUDA kernels (Triton dequantization, AWQ GEMM); "
            f"{profile.label} is not an NVIDIA GPU"
        )
    bits = {"gptq": TRAINING_GPTQ_BITS, "awq": (4,)}[method]
    if config.bits not in bits or (method == "awq" and _awq_version(config) != "gemm"):
        raise UnsupportedError(
            f"training on {name} with bits={config.bits} is not modelled (gptqmodel trains "
            f"{name} {'/'.join(map(str, bits))}-bit{', gemm format' if method == 'awq' else ''})"
        )


def _check_fp8(config: Any, profile: DeviceProfile, *, train: bool, lora: bool) -> None:
    capability = profile.compute_capability
    if profile.vendor != "nvidia" or capability is None or capability < FP8_CAPABILITY:
        raise UnsupportedError(
            f"FP8 weights need an NVIDIA GPU of compute capability 8.9+ (Ada, Hopper, Blackwell); "
            f"{profile.label} has no FP8 kernels (transformers would dequantize to bf16)"
        )
    if config.dequantize:
        raise UnsupportedError("FineGrainedFP8Config(dequantize=True) loads the weights in bf16: simulate without quantization")
    if train and not lora:
        raise UnsupportedError(
            "FP8 weights stay frozen (transformers' FP8Linear has no weight gradient): train LoRA "
            "adapters on them (--lora-rank) or simulate --task forward"
        )


def _swap_fp8(model: torch.nn.Module, config: Any, dtype: torch.dtype) -> None:
    """transformers' own swap (``replace_with_fp8_linear``, through its quantizer, as for a
    pre-quantized checkpoint); a bias the checkpoint holds in the model's dtype."""
    import torch
    from transformers.integrations.finegrained_fp8 import FP8Experts, FP8Linear
    from transformers.quantizers.auto import AutoHfQuantizer

    quantizer = AutoHfQuantizer.from_config(config, pre_quantized=True)
    quantizer.preprocess_model(model, device_map={"": "meta"})
    if any(isinstance(m, FP8Experts) for m in model.modules()):
        raise UnsupportedError("FP8 mixture-of-experts layers (transformers' FP8Experts) are not modelled; dense FP8 models are")
    for module in model.modules():
        if isinstance(module, FP8Linear):
            if module.bias is not None:
                module.bias = torch.nn.Parameter(module.bias.to(dtype), requires_grad=module.bias.requires_grad)
            for scale in (module.weight_scale_inv, module.activation_scale):
                if scale is not None:
                    scale.logical_numel = 0  # type: ignore[attr-defined]
    quantizer.postprocess_model(model)


def _mark_quantized(model: torch.nn.Module, config: Any) -> None:
    """What transformers' ``preprocess_model`` and ``postprocess_model`` record on a quantized model."""
    from transformers import PreTrainedModel

    model.is_quantized = True  # type: ignore[assignment]
    model.quantization_method = config.quant_method  # type: ignore[assignment]
    model.config.quantization_config = config  # type: ignore[union-attr]
    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            module.config._is_quantized = True


def _is_fp8(config: Any) -> bool:
    return type(config).__name__ == "FineGrainedFP8Config"


def _method(config: Any) -> str:
    return "awq" if type(config).__name__ == "AwqConfig" else "gptq"


def _awq_version(config: Any) -> str:
    version = getattr(config, "version", None) or getattr(config, "format", "gemm")
    return str(getattr(version, "value", version)).lower()
