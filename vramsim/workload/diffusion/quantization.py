"""``--quantization`` on a pipeline: which components diffusers' docs quantize, each through its own library."""

from __future__ import annotations

import torch

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.quantization.diffusers_formats import (
    DIFFUSERS_FORMAT_NAMES,
    check_diffusers_format,
    quantize_diffusers_format,
)
from vramsim.workload.quantization.torchao import TORCHAO_NAMES, is_torchao
from vramsim.workload.quantization.weights import BITSANDBYTES_NAMES, check_quantized_target, quantization_config, quantize_model

__all__ = ["quantize_components"]


def quantize_components(
    spec: PipelineSpec, modules: dict[str, torch.nn.Module], config: SimulationConfig, device: str, dtype: torch.dtype
) -> None:
    """``--quantization`` on a pipeline quantizes what diffusers' docs quantize: with bitsandbytes, what its
    pipeline-level quantization and its quantization post quantize (``PipelineQuantizationConfig`` over
    ``transformer`` and ``text_encoder_2`` for FLUX): the denoiser and the T5 text encoders, each through its own
    library's quantizer; with torchao, Quanto or GGUF, the denoiser alone (their docs load the transformer with
    its config, or from a GGUF file, and the rest as is). CLIP encoders and the VAE keep their dtype."""
    from transformers import BitsAndBytesConfig

    given = config.quantization if isinstance(config.quantization, str) else type(config.quantization).__name__
    supported = (*BITSANDBYTES_NAMES, *TORCHAO_NAMES, *DIFFUSERS_FORMAT_NAMES)
    if given not in supported and not isinstance(config.quantization, BitsAndBytesConfig) and not is_torchao(config.quantization):
        raise UnsupportedError(
            f"{spec.class_name}: pipelines are quantized with bitsandbytes, torchao, quanto or gguf "
            f"({', '.join(supported)}), not {given}"
        )
    if given in DIFFUSERS_FORMAT_NAMES:
        check_diffusers_format(given, target=config.device, dtype=dtype)
        given_hooks = {
            "offload": config.offload != "no",
            "group_offload": config.group_offload,
            "layerwise_casting": config.layerwise_casting,
        }
        moved = [option for option, on in given_hooks.items() if on]
        if given.startswith("quanto") and moved:
            raise UnsupportedError(
                f"{given} with {', '.join(moved)} is not modelled: vramsim's offload and casting hooks do not move "
                "quanto's weight tensors"
            )
        for name in _quantized(spec, modules, config, denoiser_only=True):
            if name not in spec.denoisers:
                raise UnsupportedError(f"{given} quantizes a denoiser only, not {name}")
            quantize_diffusers_format(modules[name], given, device)
        return
    quantization = quantization_config(config.quantization, dtype)
    check_quantized_target(quantization, target=config.device, train=False, lora=False)
    for name in _quantized(spec, modules, config, denoiser_only=is_torchao(quantization)):
        quantize_model(modules[name], quantization, device=device, target=config.device)


def _quantized(
    spec: PipelineSpec, modules: dict[str, torch.nn.Module], config: SimulationConfig, *, denoiser_only: bool
) -> list[str]:
    """The components to quantize: ``quantized_components`` as given (``PipelineQuantizationConfig``'s
    ``components_to_quantize``), else what diffusers' docs quantize with that library."""
    from transformers import T5EncoderModel, UMT5EncoderModel

    if config.quantized_components is None:
        encoders = () if denoiser_only else (T5EncoderModel, UMT5EncoderModel)
        return [name for name, module in modules.items() if name in spec.denoisers or isinstance(module, encoders)]
    given = [name.strip() for name in config.quantized_components.split(",")]
    unknown = [name for name in given if name not in modules]
    if unknown:
        raise ConfigError(
            f"quantized_components: {spec.class_name} has no {', '.join(unknown)}; its components quantized here are "
            f"{', '.join(modules)} (the VAE is built after)"
        )
    return given
