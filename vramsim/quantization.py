"""Quantized weights as the libraries make them.

transformers' own quantizer (``AutoHfQuantizer``) swaps the model's linear layers for the library's
(bitsandbytes' ``Linear4bit`` and ``Linear8bitLt``), as ``from_pretrained`` does; bitsandbytes then
quantizes each weight on the meta device with its own functions. The packed storage, its metadata
(absmax, the nested statistics of double quantization, the codebooks) and what the kernels allocate
(each matmul's dequantized weight) are therefore the library's own, not a formula of ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .errors import ConfigError, UnsupportedError
from .report import Assumption

__all__ = [
    "QUANTIZATIONS", "check_quantized_target", "describe_quantization", "logical_numel", "quantization_config",
    "quantization_notes", "quantize_model",
]

QUANTIZATIONS: dict[str, dict[str, Any]] = {
    "nf4": {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    "nf4-dq": {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True},
    "fp4": {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4"},
    "fp4-dq": {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4", "bnb_4bit_use_double_quant": True},
    "int8": {"load_in_8bit": True},
}
"""``--quantization`` names -> ``BitsAndBytesConfig`` arguments; ``-dq`` adds double quantization
(QLoRA's absmax quantized again in blocks of 256); ``int8`` is LLM.int8 (outlier threshold 6);
the rest are the library's defaults."""


def quantization_config(spec: Any, compute_dtype: torch.dtype) -> Any:
    """The library's config for ``spec``: a name of ``QUANTIZATIONS`` (4-bit matmuls computing in
    ``compute_dtype``, the weights' dtype), or transformers' own config object, used as given."""
    from transformers import BitsAndBytesConfig
    from transformers.utils.quantization_config import QuantizationConfigMixin

    if isinstance(spec, QuantizationConfigMixin):
        if not isinstance(spec, BitsAndBytesConfig):
            raise UnsupportedError(f"{type(spec).__name__} is not simulated yet; bitsandbytes (BitsAndBytesConfig) is")
        return spec
    arguments = QUANTIZATIONS.get(str(spec).lower())
    if arguments is None:
        raise ConfigError(f"unknown quantization {spec!r}; choose one of: {', '.join(QUANTIZATIONS)}")
    if arguments.get("load_in_4bit"):
        arguments = {**arguments, "bnb_4bit_compute_dtype": compute_dtype}
    return BitsAndBytesConfig(**arguments)


def check_quantized_target(config: Any, *, target: str, train: bool) -> None:
    """Refuse what vramsim does not model on the CPU: bitsandbytes' 4-bit layers repack their weights
    for AVX512 kernels when they infer (``Linear4bit.forward``, host-dependent), and LLM.int8 runs
    the library's reference composites there."""
    if target.lower() != "cpu":
        return
    if config.load_in_8bit:
        raise UnsupportedError("bitsandbytes LLM.int8 on the cpu target runs the library's reference composites, "
                               "which vramsim does not model; simulate a GPU target")  # fmt: skip
    if not train:
        raise UnsupportedError(
            "bitsandbytes 4-bit inference on the cpu target repacks weights for the host's AVX512 kernels, which "
            "vramsim does not model; simulate a GPU target (training on the cpu target is modelled)"
        )


def quantize_model(model: torch.nn.Module, config: Any, *, device: str) -> None:
    """Swap ``model``'s linear layers for the library's and quantize their weights on ``device``, in
    place (meta stands for the target; a real device quantizes for real, as ``validate`` measures)."""
    from transformers import PreTrainedModel
    from transformers.quantizers.auto import AutoHfQuantizer

    if not isinstance(model, PreTrainedModel):
        raise UnsupportedError("quantization goes through transformers' quantizer; give a transformers model")
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    quantizer = AutoHfQuantizer.from_config(config, pre_quantized=False)
    quantizer.preprocess_model(model, device_map={"": device})
    with _codebooks_of_this_run():
        for module in model.modules():
            _quantize_weight(module, _checkpoint_tensor(dtype, device))
    quantizer.postprocess_model(model)


def describe_quantization(model: torch.nn.Module) -> str | None:
    """The header's words for a quantized model: format, metadata and compute dtype."""
    from transformers import BitsAndBytesConfig

    config = getattr(getattr(model, "config", None), "quantization_config", None)
    if not isinstance(config, BitsAndBytesConfig):
        return None
    if config.load_in_8bit:
        return f"bitsandbytes LLM.int8 (int8 rows, float32 row scales, outlier threshold {config.llm_int8_threshold})"
    double = ", double quantization" if config.bnb_4bit_use_double_quant else ""
    compute = str(config.bnb_4bit_compute_dtype).removeprefix("torch.")
    return f"bitsandbytes {config.bnb_4bit_quant_type} (block 64{double}), compute {compute}"


def quantization_notes(model: torch.nn.Module, *, train: bool, lora: bool, gpu: bool) -> list[Assumption]:
    """What the simulated run of a quantized model assumed, beyond the library's own code."""
    from vramsim.tracer.kernels.bitsandbytes_kernels import NOTE_GEMM_4BIT, NOTE_LLM_INT8

    config = getattr(getattr(model, "config", None), "quantization_config", None)
    eight_bit = getattr(config, "load_in_8bit", False)
    notes = [Assumption(name="quantized_weights", detail=f"{describe_quantization(model)}: weights quantized at load "
                        "time by the library from a checkpoint in the model's dtype; layers it skips stay unquantized")]
    if gpu and eight_bit and getattr(config, "llm_int8_threshold", 0.0) > 0:
        notes.append(Assumption(name="llm_int8_outliers", detail=NOTE_LLM_INT8))
    elif gpu and not eight_bit:
        notes.append(Assumption(name="gemm_4bit_path", detail=NOTE_GEMM_4BIT))
    if train and lora:
        notes.append(Assumption(name="kbit_training", detail="peft.prepare_model_for_kbit_training (QLoRA's recipe, "
                                "also TRL's): the base frozen, its unquantized weights upcast to float32"))
    return notes


def logical_numel(param: torch.Tensor) -> int:
    """A weight's parameter count: a packed 4-bit weight holds two per byte; its quant state keeps the
    unpacked shape."""
    shape = getattr(getattr(param, "quant_state", None), "shape", None)
    return int(torch.Size(shape).numel()) if shape is not None else param.numel()


def _checkpoint_tensor(dtype: torch.dtype, device: str) -> Callable[[torch.Size], torch.Tensor]:
    """A weight as loading hands it to the quantizer: the checkpoint's tensor, on the device, in the
    model's dtype (on a real device, values as ``initializer_range`` draws them)."""

    def make(shape: torch.Size) -> torch.Tensor:
        if device == "meta":
            return torch.empty(shape, dtype=dtype, device=device)
        return torch.randn(shape, device=device).mul_(0.02).to(dtype)

    return make


def _quantize_weight(module: torch.nn.Module, checkpoint_tensor: Callable[..., torch.Tensor]) -> None:
    """Quantize one swapped layer's weight with the library's own function, as its parameter class
    does when loading moves it to the device (``Params4bit._quantize``, ``Int8Params._quantize``, which
    quantizes from fp16)."""
    import bitsandbytes as bnb

    weight = getattr(module, "weight", None)
    if isinstance(module, bnb.nn.Linear4bit):
        assert isinstance(weight, bnb.nn.Params4bit)
        loaded = checkpoint_tensor(weight.shape)
        packed, state = bnb.functional.quantize_4bit(
            loaded, blocksize=weight.blocksize, compress_statistics=weight.compress_statistics,
            quant_type=weight.quant_type, quant_storage=weight.quant_storage,
        )  # fmt: skip
        module.weight = bnb.nn.Params4bit(
            packed, requires_grad=False, quant_state=state, blocksize=weight.blocksize,
            compress_statistics=weight.compress_statistics, quant_type=weight.quant_type,
            quant_storage=weight.quant_storage, bnb_quantized=True, module=module,
        )  # fmt: skip
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
