"""The choices a simulated run was made with, each said with where it came from: the report's header."""

from __future__ import annotations

from typing import Any

import torch

from .config import SimulationConfig
from .optimizers import describe_optimizer
from .program import Program
from .quantization import describe_quantization

__all__ = ["run_settings"]


def run_settings(config: SimulationConfig, program: Program) -> dict[str, str]:
    """Setting -> what was in force, for the choices that apply to ``config.task``."""
    if "" not in program.modules:  # a pipeline of named components: each one's weights
        return {"weights": ", ".join(f"{name} {_dtype(_first_dtype(module))}" for name, module in program.modules.items())}
    model = program.model
    get_base_model = getattr(model, "get_base_model", None)
    base = get_base_model() if callable(get_base_model) else model  # peft wraps the model LoRA adapts
    settings = {"weights": _weights(config, program, base)}
    quantized = describe_quantization(base)
    if quantized is not None:
        settings["quantization"] = quantized
    if config.mixed_precision is not None or config.task == "train":
        settings["autocast"] = _dtype(config.mixed_precision) if isinstance(config.mixed_precision, torch.dtype) else "off"
    if config.task == "train":
        settings["optimizer"] = describe_optimizer(program.optimizer) if program.optimizer is not None else "none"
        settings["checkpointing"] = config.checkpointing
    if config.lora is not None:
        settings["LoRA"] = _lora(model)
    if config.task == "generate":
        settings["new tokens"] = str(config.max_new_tokens)
        settings["KV cache"] = config.cache_implementation
    return settings


def _dtype(dtype: torch.dtype | None) -> str:
    return str(dtype).removeprefix("torch.") if dtype is not None else "none"


def _first_dtype(model: torch.nn.Module) -> torch.dtype | None:
    return next((p.dtype for p in model.parameters()), None)


def _weights(config: SimulationConfig, program: Program, model: torch.nn.Module) -> str:
    dtype = _first_dtype(model)
    if dtype is None:
        return "none"
    source = program.weights_from
    if source == "given" and dtype != config.dtype:  # peft's k-bit prep upcasts a quantized model's other weights
        return f"{_dtype(dtype)} (given {_dtype(config.dtype)}, upcast for k-bit training)"  # type: ignore[arg-type]
    return f"{_dtype(dtype)} ({'default to train' if source == 'default' and config.task == 'train' else source})"


def _lora(model: Any) -> str:
    config = next(iter(getattr(model, "peft_config", {}).values()), None)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rank = getattr(config, "r", "?")
    targets = getattr(config, "target_modules", None)
    named = targets if isinstance(targets, str) else ",".join(sorted(targets or []))
    return f"rank {rank} on {named}, {trainable:,} trainable parameters"
