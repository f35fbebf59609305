"""Quantized weights as the libraries make them.

bitsandbytes: transformers' own quantizer (``AutoHfQuantizer``) swaps the model's linear layers for
the library's (``Linear4bit`` and ``Linear8bitLt``), as ``from_pretrained`` does; bitsandbytes then
quantizes each weight on the meta device with its own functions. The packed storage, its metadata
(absmax, the nested statistics of double quantization, the codebooks) and what the kernels allocate
(each matmul's dequantized weight) are therefore the library's own, not a formula of ours.

FP8 (``FineGrainedFP8Config``): transformers' quantizer swaps in its own ``FP8Linear`` (float8
weights, float32 block scales), as for a pre-quantized checkpoint; its kernels come from the Hub
at run time, so a stand-in makes what they allocate (``tracer/kernels/fp8_linear.py``).

GPTQ and AWQ (``GPTQConfig``, ``AwqConfig``): transformers loads them through gptqmodel, whose
layers need its CUDA extension; ``marlin_linear.MarlinLinear`` holds what gptqmodel's Marlin layers
hold once loaded, and ``vramsim::marlin_gemm`` allocates what their kernel does (``tracer/kernels/marlin.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vramsim.config.choices import QUANTIZATIONS
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.results.report import Assumption
from vramsim.workload.quantization.diffusers_formats import DIFFUSERS_FORMAT_NAMES, QUANTO_NAMES, quanto_matmul_traced
from vramsim.workload.quantization.formats import check_format_target, describe_format, format_notes, quantize_format
from vramsim.workload.quantization.torchao import (
    TORCHAO_NAMES,
    is_torchao,
    quantize_torchao_diffusers,
    torchao_quant_type,
    uses_mslk_int4,
)

if TYPE_CHECKING:  # torch loads when a model is quantized
    import torch

__all__ = [
    "BITSANDBYTES_NAMES",
    "QUANTIZATION_ARGUMENTS",
    "check_quantized_target",
    "describe_quantization",
    "is_bitsandbytes",
    "logical_numel",
    "quantization_config",
    "quantization_notes",
    "quantize_model",
    "quantized_kernels_on_meta",
]

QUANTIZATION_ARGUMENTS: dict[str, dict[str, Any]] = {
    "nf4": {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    "nf4-dq": {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True},
    "fp4": {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4"},
    "fp4-dq": {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4", "bnb_4bit_use_double_quant": True},
    "int8": {"load_in_8bit": True},
    "gptq": {"bits": 4, "group_size": 128},
    "awq": {"bits": 4, "group_size": 128},
    "fp8": {},
    "fp8-rowwise": {},
    "int8wo": {},
    "int4wo": {},
    "int4wo-tinygemm": {},
}
"""The config's ``QUANTIZATIONS`` names -> the library config's arguments (``BitsAndBytesConfig``'s, unless
``_CONFIG_CLASSES`` names another); ``-dq`` adds double quantization (QLoRA's absmax quantized again
in blocks of 256); ``int8`` is LLM.int8 (outlier threshold 6); ``gptq`` and ``awq`` are 4 bits in
groups of 128, as the common checkpoints; ``fp8`` is e4m3 weights in 128x128 blocks with dynamic
activation scales; ``fp8-rowwise`` is torchao's ``Float8DynamicActivationFloat8WeightConfig`` per row (a
scale per weight row and per input token); ``int8wo`` is torchao's ``Int8WeightOnlyConfig`` (per row);
``int4wo`` is torchao's ``Int4WeightOnlyConfig`` (groups of 128), ``int4wo-tinygemm`` the same in torch's
tinygemm tiles (``int4_packing_format="tile_packed_to_4d"``); the rest are the libraries' defaults."""
_CONFIG_CLASSES = {
    "gptq": "GPTQConfig",
    "awq": "AwqConfig",
    "fp8": "FineGrainedFP8Config",
    **dict.fromkeys(TORCHAO_NAMES, "TorchAoConfig"),
}
BITSANDBYTES_NAMES = tuple(name for name in QUANTIZATIONS if name not in _CONFIG_CLASSES and name not in DIFFUSERS_FORMAT_NAMES)
"""The ``QUANTIZATIONS`` names that are bitsandbytes' formats (their config is ``BitsAndBytesConfig``)."""
_SIMULATED = ("BitsAndBytesConfig", "GPTQConfig", "AwqConfig", "FineGrainedFP8Config", "TorchAoConfig")


def quantization_config(spec: Any, compute_dtype: torch.dtype) -> Any:
    """The library's config for ``spec``: a name of ``QUANTIZATIONS`` (4-bit matmuls computing in
    ``compute_dtype``, the weights' dtype), or transformers' own config object, used as given."""
    import transformers
    from transformers.utils.quantization_config import QuantizationConfigMixin

    if isinstance(spec, QuantizationConfigMixin):
        if type(spec).__name__ not in _SIMULATED:
            raise UnsupportedError(f"{type(spec).__name__} is not simulated yet; {', '.join(_SIMULATED)} are")
        return spec
    name = str(spec).lower()
    if name in DIFFUSERS_FORMAT_NAMES:
        raise UnsupportedError(f"{name} is modelled on diffusers denoisers only (a pipeline's --quantization)")
    arguments = QUANTIZATION_ARGUMENTS.get(name)
    if arguments is None:
        raise ConfigError(f"unknown quantization {spec!r}; choose one of: {', '.join(QUANTIZATIONS)}")
    if arguments.get("load_in_4bit"):
        arguments = {**arguments, "bnb_4bit_compute_dtype": compute_dtype}
    if name in TORCHAO_NAMES:
        arguments = {"quant_type": torchao_quant_type(name)}
    return getattr(transformers, _CONFIG_CLASSES.get(name, "BitsAndBytesConfig"))(**arguments)


def check_quantized_target(config: Any, *, target: str, train: bool, lora: bool) -> None:
    """Refuse what vramsim does not model: GPTQ, AWQ and FP8 where their kernels do not run
    (``quantized_formats.check_format_target``); on the CPU, bitsandbytes' 4-bit inference (its layers
    repack their weights for AVX512 kernels, ``Linear4bit.forward``, host-dependent) and LLM.int8 (the
    library's reference composites)."""
    from transformers import BitsAndBytesConfig

    if not isinstance(config, BitsAndBytesConfig):
        check_format_target(config, target=target, train=train, lora=lora)
        return
    if target.lower() != "cpu":
        return
    if config.load_in_8bit:
        raise UnsupportedError(
            "bitsandbytes LLM.int8 on the cpu target runs the library's reference composites, "
            "which vramsim does not model; simulate a GPU target"
        )
    if not train:
        raise UnsupportedError(
            "bitsandbytes 4-bit inference on the cpu target repacks weights for the host's AVX512 kernels, which "
            "vramsim does not model; simulate a GPU target (training on the cpu target is modelled)"
        )


def quantize_model(model: torch.nn.Module, config: Any, *, device: str, target: str, train: bool = False) -> None:
    """Swap ``model``'s linear layers for the library's and quantize their weights on ``device``, in
    place (meta stands for the target; a real device quantizes bitsandbytes weights for real, as
    ``validate`` measures). GPTQ, AWQ and FP8 layers are sized for ``target``'s kernels."""
    from diffusers import ModelMixin
    from transformers import BitsAndBytesConfig, PreTrainedModel

    if isinstance(model, ModelMixin):
        if is_torchao(config):
            quantize_torchao_diffusers(model, config, device)
            return
        if not isinstance(config, BitsAndBytesConfig):
            raise UnsupportedError(
                f"a diffusers model is quantized here with bitsandbytes (nf4, fp4, int8) or torchao "
                f"({', '.join(TORCHAO_NAMES)}), not {type(config).__name__}"
            )
        quantizer = _diffusers_quantizer(model, config, device)
    elif isinstance(model, PreTrainedModel):
        if not isinstance(config, BitsAndBytesConfig):
            quantize_format(model, config, device=device, target=target, train=train)
            return
        from transformers.quantizers.auto import AutoHfQuantizer

        quantizer = AutoHfQuantizer.from_config(config, pre_quantized=False)
        quantizer.preprocess_model(model, device_map={"": device})
    else:
        raise UnsupportedError("quantization goes through transformers' or diffusers' quantizer; give one of their models")
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    with _codebooks_of_this_run():
        for module in model.modules():
            _quantize_weight(module, _checkpoint_tensor(dtype, device))
    quantizer.postprocess_model(model)


def _diffusers_quantizer(model: Any, config: Any, device: str) -> Any:
    """diffusers' own bitsandbytes quantizer, as ``ModelMixin.from_pretrained`` runs it on a
    ``diffusers.BitsAndBytesConfig`` with the same arguments: the linear layers swapped (none kept in fp32
    unless the model names them)."""
    from diffusers.quantizers import DiffusersAutoQuantizer
    from diffusers.quantizers.quantization_config import BitsAndBytesConfig

    arguments = {k: v for k, v in config.to_dict().items() if k in BitsAndBytesConfig.__init__.__code__.co_varnames}
    quantizer = DiffusersAutoQuantizer.from_config(BitsAndBytesConfig(**arguments), pre_quantized=False)
    quantizer.preprocess_model(model=model, device_map={"": device}, keep_in_fp32_modules=model._keep_in_fp32_modules or [])
    return quantizer


def quantized_kernels_on_meta(spec: Any, target: str) -> contextlib.AbstractContextManager[Any]:
    """While an FP8 model is built and traced, transformers' ``fp8_linear`` is the stand-in that makes
    on meta what its Hub kernels allocate (``tracer/kernels/fp8_linear.py``); for torchao's int4, mslk's
    helpers and GEMM (``tracer/kernels/torchao_int4.py``); for quanto, its matmul's own body and its int4/int2 weights
    as ``target`` packs them; nothing for other formats."""
    if isinstance(spec, str) and spec.lower() in QUANTO_NAMES:
        return quanto_matmul_traced(target)
    if uses_mslk_int4(spec):
        from vramsim.tracer.patches import torchao_int4_on_meta

        return torchao_int4_on_meta()
    fp8 = spec.lower() == "fp8" if isinstance(spec, str) else type(spec).__name__ == "FineGrainedFP8Config"
    if not fp8:
        return contextlib.nullcontext()
    from vramsim.tracer.kernels.fp8_linear import fp8_linear
    from vramsim.tracer.patches import fp8_kernels_on_meta

    return fp8_kernels_on_meta(fp8_linear)


def is_bitsandbytes(model: torch.nn.Module) -> bool:
    """Whether bitsandbytes quantized ``model`` (QLoRA's k-bit training recipe applies to it)."""
    config = getattr(getattr(model, "config", None), "quantization_config", None)
    return type(config).__name__ == "BitsAndBytesConfig"


def describe_quantization(model: torch.nn.Module) -> str | None:
    """The header's words for a quantized model: format, metadata and compute dtype."""
    from transformers import BitsAndBytesConfig

    config = getattr(getattr(model, "config", None), "quantization_config", None)
    if config is None:
        return None
    if isinstance(config, dict):  # the checkpoint's own (gpt-oss's mxfp4, DeepSeek-V3's fp8): from_config leaves it
        method = config.get("quant_method", "own")
        if method == "mxfp4":
            return "none: the checkpoint's mxfp4 experts dequantized, as transformers does without Triton 3.4+ and kernels"
        return f"none: the checkpoint's {method} quantization_config is not applied"
    if not isinstance(config, BitsAndBytesConfig):
        from vramsim.workload.quantization.training import QUANTIZED_TRAINING_LAYERS

        return describe_format(config, training=any(isinstance(m, QUANTIZED_TRAINING_LAYERS) for m in model.modules()))
    if config.load_in_8bit:
        return f"bitsandbytes LLM.int8 (int8 rows, float32 row scales, outlier threshold {config.llm_int8_threshold})"
    double = ", double quantization" if config.bnb_4bit_use_double_quant else ""
    compute = str(config.bnb_4bit_compute_dtype).removeprefix("torch.")
    return f"bitsandbytes {config.bnb_4bit_quant_type} (block 64{double}), compute {compute}"


def quantization_notes(
    model: torch.nn.Module, *, train: bool, lora: bool, gpu: bool, kbit_preparation: str | None = "peft"
) -> list[Assumption]:
    """What the simulated run of a quantized model assumed, beyond the library's own code."""
    from transformers import BitsAndBytesConfig

    from vramsim.tracer.kernels.bitsandbytes_kernels import NOTE_GEMM_4BIT, NOTE_LLM_INT8

    config = getattr(getattr(model, "config", None), "quantization_config", None)
    if not isinstance(config, BitsAndBytesConfig):
        loaded = [
            Assumption(
                name="quantized_weights",
                detail=f"{describe_quantization(model)}: a pre-quantized checkpoint "
                "loaded as transformers loads it; layers its loader skips (the head) stay unquantized",
            )
        ]
        return loaded + format_notes(config, train=train)
    eight_bit = getattr(config, "load_in_8bit", False)
    notes = [
        Assumption(
            name="quantized_weights",
            detail=f"{describe_quantization(model)}: weights quantized at load "
            "time by the library from a checkpoint in the model's dtype; layers it skips stay unquantized",
        )
    ]
    if gpu and eight_bit and getattr(config, "llm_int8_threshold", 0.0) > 0:
        notes.append(Assumption(name="llm_int8_outliers", detail=NOTE_LLM_INT8))
    elif gpu and not eight_bit:
        notes.append(Assumption(name="gemm_4bit_path", detail=NOTE_GEMM_4BIT))
    if train and lora:
        detail = (
            "peft.prepare_model_for_kbit_training (kbit_preparation=peft): the base frozen, its unquantized weights "
            "upcast to float32"
            if kbit_preparation == "peft"
            else "no k-bit preparation (kbit_preparation=none, as torchtune and TRL >= 0.27): the base's unquantized "
            "weights trained as loaded, frozen by peft"
        )
        notes.append(Assumption(name="kbit_training", detail=detail))
    return notes


def logical_numel(param: torch.Tensor) -> int:
    """A weight's parameter count: a packed 4-bit weight holds two per byte; its quant state keeps the
    unpacked shape. GPTQ/AWQ/FP8 layers set ``logical_numel`` on their tensors (0 on scales and zeros)."""
    import torch

    given = getattr(param, "logical_numel", None)
    if given is not None:
        return int(given)
    shape = getattr(getattr(param, "quant_state", None), "shape", None)
    return int(torch.Size(shape).numel()) if shape is not None else param.numel()


def _checkpoint_tensor(dtype: torch.dtype, device: str) -> Callable[[torch.Size], torch.Tensor]:
    """A weight as loading hands it to the quantizer: the checkpoint's tensor, on the device, in the
    model's dtype (on a real device, values as ``initializer_range`` draws them)."""

    def make(shape: torch.Size) -> torch.Tensor:
        import torch

        if device == "meta":
            return torch.empty(shape, dtype=dtype, device=device)
        return torch.randn(shape, device=device).mul_(0.02).to(dtype)

    return make


def _quantize_weight(module: torch.nn.Module, checkpoint_tensor: Callable[..., torch.Tensor]) -> None:
    """Quantize one swapped layer's weight with the library's own function, as its parameter class
    does when loading moves it to the device (``Params4bit._quantize``, ``Int8Params._quantize``, which
    quantizes from fp16)."""
    import bitsandbytes as bnb
    import torch

    weight = getattr(module, "weight", None)
    if isinstance(module, bnb.nn.Linear4bit):
        assert isinstance(weight, bnb.nn.Params4bit)
        loaded = checkpoint_tensor(weight.shape)
        packed, state = bnb.functional.quantize_4bit(
            loaded,
            blocksize=weight.blocksize,
            compress_statistics=weight.compress_statistics,
            quant_type=weight.quant_type,
            quant_storage=weight.quant_storage,
        )
        module.weight = bnb.nn.Params4bit(
            packed,
            requires_grad=False,
            quant_state=state,
            blocksize=weight.blocksize,
            compress_statistics=weight.compress_statistics,
            quant_type=weight.quant_type,
            quant_storage=weight.quant_storage,
            bnb_quantized=True,
            module=module,
        )
        module.quant_state = state
    elif isinstance(module, bnb.nn.Linear8bitLt):
        assert isinstance(weight, bnb.nn.Int8Params)
        rows, scales, _ = bnb.functional.int8_vectorwise_quant(checkpoint_tensor(weight.shape).to(torch.float16))
        quantized = bnb.nn.Int8Params(rows, requires_grad=False, has_fp16_weights=False)
        quantized.CB, quantized.SCB = rows, scales
        module.weight = quantized


@contextlib.contextmanager
def _codebooks_of_this_run() -> Iterator[None]:
    """bitsandbytes caches its dynamic codebook on the device of the first quantization: this run's
    layers share one made on its device, and one made on meta must not outlive the simulation, or a
    later real quantization would use it."""
    import bitsandbytes.functional as functional

    cached = dict(functional.name2qmap)
    functional.name2qmap.clear()  # a real device's cached codebook must not meet meta weights either
    try:
        yield
    finally:
        functional.name2qmap.clear()
        functional.name2qmap.update(cached)
