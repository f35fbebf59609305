"""Turn a model source and a config into a runnable ``Workload`` on one device."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.tracer.kernels.emulation import KernelEmulation

from .config import SimulationConfig
from .errors import ConfigError, TraceError
from .inputs import default_inputs
from .models import ModelSource, build_model, load_builder, load_config
from .workload import Workload

__all__ = ["build_workload", "weight_dtype"]


def weight_dtype(config: SimulationConfig, model_config: Any) -> torch.dtype:
    """float32 to train unless told otherwise; inference loads the checkpoint's own dtype."""
    if config.dtype is not None:
        return config.dtype
    if config.task != "train":
        stored = getattr(model_config, "dtype", None) or getattr(model_config, "torch_dtype", None)
        if isinstance(stored, torch.dtype) and stored.is_floating_point:
            return stored
    return torch.float32


def build_workload(
    source: ModelSource,
    config: SimulationConfig,
    *,
    device: str,
    emulation: KernelEmulation | None = None,
    foreach: bool = False,
) -> Workload:
    """Build model, batch and optimizer on ``device``.

    On meta, ``emulation`` supplies the target's autocast and re-enters itself for checkpoint
    recompute; on a real device, torch's own autocast is used.
    """
    if isinstance(source, (str, Path)):
        source = load_builder(str(source)) or load_config(source, trust_remote_code=config.trust_remote_code)
    if isinstance(source, PretrainedConfig):
        source = copy.deepcopy(source)  # building a model writes its dtype into the config
        dtype: torch.dtype | None = weight_dtype(config, source)
    else:
        dtype = config.dtype
    model = build_model(
        source,
        device=device,
        dtype=dtype,
        model_class=config.model_class,
        trust_remote_code=config.trust_remote_code,
        task=config.task,
    )
    train = config.task == "train"
    model.train(train)
    if config.gradient_checkpointing:
        _enable_checkpointing(model, emulation)
    if config.lora is not None:
        model = _apply_lora(model, config.lora)
    with torch.device(device):
        batch = (config.inputs or (lambda b, s: default_inputs(model, b, s, train=train)))(config.batch_size, config.seq_len)
    optimizer = _make_optimizer(model, config.optimizer, foreach=foreach) if train else None
    mixed = config.mixed_precision
    scaler = _grad_scaler(model, device) if optimizer is not None and mixed == torch.float16 else None
    return Workload(
        model=model,
        task=config.task,
        batch=batch,
        loss=config.loss,
        optimizer=optimizer,
        autocast=_autocast(mixed, device, emulation),
        max_new_tokens=config.max_new_tokens or 0,
        steps=config.steps,
        scaler=scaler,
    )


def _grad_scaler(model: torch.nn.Module, device: str) -> torch.amp.GradScaler:
    """The AMP recipe for fp16 autocast: fp32 master weights and a ``GradScaler`` for the
    device the step runs on (meta stands for the target; torch/amp/grad_scaler.py checks
    CUDA availability for ``"cuda"`` only). bf16 autocast needs no scaler."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    if any(p.dtype == torch.float16 for p in trainable):
        raise ConfigError(
            "fp16 autocast training scales the loss with a GradScaler, which cannot unscale fp16 gradients; "
            "keep fp32 master weights (drop dtype=fp16) or use mixed_precision=bf16"
        )
    return torch.amp.GradScaler(torch.device(device).type)


def _autocast(
    dtype: torch.dtype | None, device: str, emulation: KernelEmulation | None
) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    if dtype is None:
        return contextlib.nullcontext
    if emulation is not None:
        return lambda: emulation.autocast(dtype)
    return lambda: torch.autocast(device, dtype=dtype)


def _enable_checkpointing(model: torch.nn.Module, emulation: KernelEmulation | None) -> None:
    """The model's own checkpointing, non-reentrant (transformers' default)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(f"{type(model).__name__} does not support gradient checkpointing; drop --gradient-checkpointing")
    kwargs: dict[str, Any] = {"use_reentrant": False}
    if emulation is not None:
        kwargs["context_fn"] = emulation.checkpoint_contexts
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def _apply_lora(model: torch.nn.Module, lora: Any) -> torch.nn.Module:
    import peft

    lora_config = lora if isinstance(lora, peft.LoraConfig) else peft.LoraConfig(**dict(lora))
    try:
        return peft.get_peft_model(model, lora_config)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"LoRA cannot be applied: {exc}") from exc


def _make_optimizer(model: torch.nn.Module, optimizer: Any, *, foreach: bool) -> torch.optim.Optimizer | None:
    """Optimizers with the target's implementation choice (foreach or for-loop) made explicit."""
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer is None:
        return None
    if callable(optimizer):
        made = optimizer(params)
        if not isinstance(made, torch.optim.Optimizer):
            raise ConfigError(f"the optimizer factory returned {type(made).__name__}, not a torch.optim.Optimizer")
        return made
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=foreach)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=1e-4, foreach=foreach)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    if optimizer == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-2, foreach=foreach)
    raise TraceError(f"optimizer {optimizer!r} passed the config check but has no factory")
