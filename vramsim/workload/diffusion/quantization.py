"""``--quantization`` on a pipeline: which components diffusers' docs quantize, each through its own library."""

from __future__ import annotations

import torch

from vramsim.config import SimulationConfig
from vramsim.errors import UnsupportedError
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.quantization.torchao import TORCHAO_NAMES, is_torchao
from vramsim.workload.quantization.weights import BITSANDBYTES_NAMES, check_quantized_target, quantization_config, quantize_model

__all__ = ["quantize_components"]


def quantize_components(
    spec: PipelineSpec, modules: dict[str, torch.nn.Module], config: SimulationConfig, device: str, dtype: torch.dtype
) -> None:
    """``--quantization`` on a pipeline quantizes what diffusers' docs quantize: with bitsandbytes, what its
    pipeline-level quantization and its quantization post quantize (``PipelineQuantizationConfig`` over
    ``transformer`` and ``text_encoder_2`` for FLUX): the denoiser and the T5 text encoders, each through its own
    library's quantizer; with torchao, the denoiser alone (its torchao docs load the transformer with
    ``TorchAoConfig`` and the rest as is). CLIP encoders and the VAE keep their dtype."""
    from transformers import BitsAndBytesConfig, T5EncoderModel, UMT5EncoderModel

    given = config.quantization if isinstance(config.quantization, str) else type(config.quantization).__name__
    supported = (*BITSANDBYTES_NAMES, *TORCHAO_NAMES)
    if given not in supported and not isinstance(config.quantization, BitsAndBytesConfig) and not is_torchao(config.quantization):
        raise UnsupportedError(
            f"{spec.class_name}: pipelines are quantized with bitsandbytes or torchao ({', '.join(supported)}), not {given}"
        )
    quantization = quantization_config(config.quantization, dtype)
    check_quantized_target(quantization, target=config.device, train=False, lora=False)
    encoders = () if is_torchao(quantization) else (T5EncoderModel, UMT5EncoderModel)
    for name, module in modules.items():
        if name == spec.denoiser or isinstance(module, encoders):
            quantize_model(module, quantization, device=device, target=config.device)
