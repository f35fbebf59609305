"""The choices a simulated run was made with, each said with where it came from: the report's header."""

from __future__ import annotations

from typing import Any

import torch

from vramsim.config import SimulationConfig
from vramsim.workload.float8 import float8_linears
from vramsim.workload.optimizers import describe_optimizer
from vramsim.workload.program import Program
from vramsim.workload.quantization.diffusers_formats import describe_diffusers_format
from vramsim.workload.quantization.weights import describe_quantization

__all__ = ["run_settings"]


def run_settings(config: SimulationConfig, program: Program) -> dict[str, str]:
    """Setting -> what was in force, for the choices that apply to ``config.task``."""
    if "" not in program.modules:  # a pipeline of named components: each one's weights
        weights = {"weights": ", ".join(f"{name} {_dtype(_first_dtype(module))}" for name, module in program.modules.items())}
        formats = {name: describe_diffusers_format(module) for name, module in program.modules.items()}
        if any(formats.values()):
            weights["quantization"] = ", ".join(f"{name} {kind}" for name, kind in formats.items() if kind)
        if config.task != "train":
            return weights
        autocast = _dtype(config.mixed_precision) if isinstance(config.mixed_precision, torch.dtype) else "off"
        return weights | {
            "autocast": autocast,
            "optimizer": describe_optimizer(program.optimizer) if program.optimizer is not None else "none",
            "checkpointing": config.checkpointing,
        }
    model = program.model
    get_base_model = getattr(model, "get_base_model", None)
    base = get_base_model() if callable(get_base_model) else model  # peft wraps the model LoRA adapts
    settings = {"recipe": config.recipe} if config.task == "train" else {}
    settings["weights"] = _weights(config, program, base)
    if config.packed:
        tokens = config.batch_size * config.seq_len
        settings["packing"] = f"padding-free, one row of {tokens:,} tokens, positions restarting every {config.seq_len:,}"
    quantized = describe_quantization(base)
    if quantized is not None:
        settings["quantization"] = quantized
    if config.mixed_precision is not None or config.task == "train":
        settings["autocast"] = _dtype(config.mixed_precision) if isinstance(config.mixed_precision, torch.dtype) else "off"
    if config.task == "train":
        settings["optimizer"] = describe_optimizer(program.optimizer) if program.optimizer is not None else "none"
        settings["checkpointing"] = config.checkpointing
        if config.activation_offloading:
            settings["activation offloading"] = "torchtune's OffloadActivations (streams)"
        if config.float8 is not None:
            settings["float8"] = _float8(config.float8, base)
        settings |= _loop(config)
    if config.lora is not None:
        settings["adapters"] = _lora(model, config.lora)
    if config.task == "generate":
        settings["new tokens"] = str(config.max_new_tokens)
        settings["KV cache"] = config.cache_implementation
    return settings


def _float8(recipe: str, model: torch.nn.Module) -> str:
    """The recipe and how many linears run it (torchao's ``Float8Linear``)."""
    converted = len(float8_linears(model))
    linears = sum(isinstance(module, torch.nn.Linear) for module in model.modules())
    return f"torchao {recipe} on {converted} of {linears} linears"


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


def _loop(config: SimulationConfig) -> dict[str, str]:
    """The training loop's shape: accumulation, clipping, what holds the outputs, whose loss."""
    loop = {}
    if config.grad_accum > 1:
        loop["gradient accumulation"] = f"{config.grad_accum} micro-steps per optimizer step"
    if config.max_grad_norm is not None:
        loop["gradient clipping"] = f"clip_grad_norm_ to {config.max_grad_norm:g} (foreach)"
    if config.keep_outputs:  # the default, released before backward as the Trainer does, is in the assumptions
        loop["outputs"] = "kept through backward"
    if isinstance(config.loss, str):
        loop["loss"] = config.loss
    elif config.loss is not None:
        loop["loss"] = "custom (no labels passed, the model computes none)" if config.inputs is None else "custom"
    return loop


def _lora(model: Any, requested: Any) -> str:
    """The adapter peft built; the targets as asked (peft expands ``all-linear`` into every module it chose)."""
    config: Any = next(iter(getattr(model, "peft_config", {}).values()), None)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    kind = "DoRA" if getattr(config, "use_dora", False) else type(config).__name__.removesuffix("Config").replace("Lora", "LoRA")
    asked = requested.get("target_modules") if isinstance(requested, dict) else getattr(requested, "target_modules", None)
    targets = asked or getattr(config, "target_modules", None)
    named = targets if isinstance(targets, str) else ",".join(sorted(targets or []))
    shape = ""
    if kind in ("LoRA", "DoRA"):
        shape = f"rank {config.r}, alpha {config.lora_alpha:g}, dropout {config.lora_dropout:g}, "
    saved = getattr(config, "modules_to_save", None)
    copies = f", copies of {','.join(saved)} trained" if saved else ""
    return f"{kind} {shape}on {named}{copies}, {trainable:,} trainable parameters"
