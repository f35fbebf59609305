"""The options of one simulation, checked once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import torch

from vramsim.estimators.checkpointing import parse_checkpointing
from vramsim.tracer.data_dependent import parse_routing

from .errors import ConfigError

__all__ = ["SimulationConfig"]

Task = Literal["train", "forward", "generate"]
TASKS = ("train", "forward", "generate")
OPTIMIZERS = ("adamw", "adam", "sgd", "adafactor")
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}
MIXED_PRECISION = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
MAX_SEQ_LEN = 1 << 22
"""Longer sequences than 4M tokens are rejected: no model is trained at that length today."""
MAX_BATCH = 1 << 20


@dataclass(kw_only=True)
class SimulationConfig:
    """Everything ``simulate`` needs besides the model; ``__post_init__`` rejects bad values."""

    task: Task = "train"
    batch_size: int = 1
    seq_len: int = 512
    device: str = "h100"
    """Target device name from the catalog (``vramsim gpus``), or ``cpu``."""
    dtype: torch.dtype | str | None = None
    """Weight dtype; ``None``: float32 to train, the config's ``torch_dtype`` for inference."""
    mixed_precision: torch.dtype | str | None = None
    """Autocast dtype (``bf16``/``fp16``) around the forward pass; weights stay in ``dtype``."""
    optimizer: str | Callable[..., torch.optim.Optimizer] | None = "adamw"
    checkpointing: str = "none"
    """Activation checkpointing: ``none``, ``full``, ``every:K``, ``selective``, ``offload`` or ``all``
    (``estimators/checkpointing.py``); computed from one trace without checkpointing."""
    gradient_checkpointing: bool = False
    """Alias of ``checkpointing="full"``."""
    lora: Any = None
    """A ``peft.LoraConfig`` or a dict of its arguments."""
    max_new_tokens: int | None = None
    inputs: Callable[[int, int], dict[str, Any]] | None = None
    loss: Callable[[Any], torch.Tensor] | None = None
    model_class: str | None = None
    trust_remote_code: bool = False
    expandable_segments: bool = False
    """``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` for the allocator replay."""
    headroom: float = 0.10
    """Share of device memory kept free when judging whether the job fits."""
    moe_routing: str = "balanced"
    """Load MoE routers give experts: ``balanced``, ``worst-case`` or ``capacity:F`` (``tracer/data_dependent.py``)."""
    steps: int = field(default=2, repr=False)
    """Steps run; the last one is the steady state that is reported."""

    @classmethod
    def from_options(cls, **options: Any) -> SimulationConfig:
        """Like the constructor, but an unknown option is a ConfigError naming the choices."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r}; choose from: {', '.join(sorted(names))}")
        return cls(**options)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"unknown task {self.task!r}; choose one of: {', '.join(TASKS)}")
        _check_count("batch_size", self.batch_size, MAX_BATCH)
        _check_count("seq_len", self.seq_len, MAX_SEQ_LEN)
        self.dtype = _dtype("dtype", self.dtype, DTYPES)
        self.mixed_precision = _dtype("mixed_precision", self.mixed_precision, MIXED_PRECISION)
        if isinstance(self.optimizer, str):
            self.optimizer = self.optimizer.lower()
            if self.optimizer not in OPTIMIZERS:
                raise ConfigError(
                    f"unknown optimizer {self.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}, "
                    "or pass a callable params -> torch.optim.Optimizer"
                )
        elif self.optimizer is not None and not callable(self.optimizer):
            raise ConfigError(f"optimizer must be a name or a callable, not {type(self.optimizer).__name__}")
        if self.max_new_tokens is None:
            self.max_new_tokens = 16 if self.task == "generate" else 0
        _check_count("max_new_tokens", self.max_new_tokens, MAX_SEQ_LEN, allow_zero=self.task != "generate")
        if isinstance(self.headroom, bool) or not isinstance(self.headroom, (int, float)) or not 0 <= self.headroom < 1:
            raise ConfigError(f"headroom must be a fraction in [0, 1), got {self.headroom!r}")
        try:
            self.moe_routing = parse_routing(self.moe_routing).spec
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        alias = self.gradient_checkpointing and self.checkpointing == "none"
        try:
            plan = parse_checkpointing("full" if alias else self.checkpointing)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.gradient_checkpointing and plan.kind != "full":
            raise ConfigError(
                f"gradient_checkpointing is checkpointing='full'; it contradicts checkpointing={self.checkpointing!r}"
            )
        self.checkpointing = plan.spec
        self.gradient_checkpointing = plan.kind == "full"
        if self.steps < 2:
            raise ConfigError(f"steps must be at least 2 (the last is the steady state), got {self.steps}")


def _check_count(name: str, value: Any, limit: int, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    low = 0 if allow_zero else 1
    if not low <= value <= limit:
        raise ConfigError(f"{name} must be between {low} and {limit}, got {value}")


def _dtype(name: str, value: Any, choices: dict[str, torch.dtype]) -> torch.dtype | None:
    if value is None or (isinstance(value, torch.dtype) and value in choices.values()):
        return value
    if isinstance(value, str) and value.lower().removeprefix("torch.") in choices:
        return choices[value.lower().removeprefix("torch.")]
    raise ConfigError(f"unsupported {name} {value!r}; choose one of: {', '.join(choices)}")
