"""The options of one simulation, checked once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal

import torch

from vramsim.estimators.checkpointing import parse_checkpointing
from vramsim.estimators.sharding import ShardingPlan, sharding_plan
from vramsim.tracer.data_dependent import parse_routing

from .errors import ConfigError

__all__ = ["Option", "SimulationConfig", "options"]

Task = Literal["train", "forward", "generate"]
TASKS = ("train", "forward", "generate")
OPTIMIZERS = ("adamw", "adam", "sgd", "adafactor")
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}
MIXED_PRECISION = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
MAX_SEQ_LEN = 1 << 22
"""Longer sequences than 4M tokens are rejected: no model is trained at that length today."""
MAX_BATCH = 1 << 20


COMMANDS = ("trace", "validate")
"""The CLI commands that run a workload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """How one ``SimulationConfig`` field is offered outside Python: the CLI flag and the report.

    The CLI's arguments and the report's JSON ``options`` are derived from these, so a new
    field is declared once, here.
    """

    help: str
    """What the option does; also the field's documentation."""
    cli: bool = True
    """Whether the command line sets it; False for Python-only values (callables)."""
    flag: str | None = None
    """The flag, when not ``--`` + the field name with dashes."""
    parse: Callable[[str], Any] | None = None
    """Turns the flag's text into the field's value (``None``: the text itself; bools are switches)."""
    commands: tuple[str, ...] = COMMANDS
    """The CLI commands that take it."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """A command's own default where it differs from the field's."""
    report: Callable[[Any], Any] | None = None
    """The value the report's JSON ``options`` shows for it; ``None``: not shown."""


def _option(**option: Any) -> dict[str, Option]:
    """A field's metadata: its ``Option``."""
    return {"option": Option(**option)}


def options() -> list[tuple[Field[Any], Option]]:
    """Every ``SimulationConfig`` field with its ``Option``, in declaration order."""
    return [(f, f.metadata["option"]) for f in fields(SimulationConfig)]


def _same(value: Any) -> Any:
    return value


def _dtype_name(value: torch.dtype | None) -> str | None:
    return str(value).removeprefix("torch.") if value else None


def _optimizer_name(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else "custom"


def _optimizer_flag(text: str) -> str | None:
    return None if text.lower() == "none" else text


@dataclass(kw_only=True)
class SimulationConfig:
    """Everything ``simulate`` needs besides the model; ``__post_init__`` rejects bad values.

    Each field's ``Option`` (its metadata) documents it and says how the CLI and the report show it.
    """

    task: Task = field(default="train", metadata=_option(help="train, forward or generate"))
    batch_size: int = field(default=1, metadata=_option(help="sequences per step", parse=int, report=_same))
    seq_len: int = field(default=512, metadata=_option(help="tokens per sequence", parse=int, report=_same))
    device: str = field(default="h100", metadata=_option(
        help="target device (vramsim gpus) or cpu; validate measures on cpu", defaults={"validate": "cpu"}))
    dtype: torch.dtype | str | None = field(default=None, metadata=_option(
        help="weight dtype: fp32, bf16, fp16; none given: float32 to train, the config's torch_dtype for inference",
        report=_dtype_name))
    mixed_precision: torch.dtype | str | None = field(default=None, metadata=_option(
        help="autocast dtype (bf16 or fp16) around the forward pass; weights stay in --dtype", report=_dtype_name))
    optimizer: str | Callable[..., torch.optim.Optimizer] | None = field(default="adamw", metadata=_option(
        help="adamw, adam, sgd, adafactor or none (Python: also a callable params -> Optimizer)",
        parse=_optimizer_flag, report=_optimizer_name))
    checkpointing: str = field(default="none", metadata=_option(
        help="activation checkpointing: none, full, every:K, selective, offload, or all for a table of each "
        "(estimators/checkpointing.py; computed from one trace without checkpointing)", report=_same))
    gradient_checkpointing: bool = field(default=False, metadata=_option(help="alias of --checkpointing full"))
    lora: Any = field(default=None, metadata=_option(
        help="train LoRA adapters of this rank (peft; Python: a peft.LoraConfig or a dict of its arguments)",
        flag="--lora-rank", parse=int, report=lambda value: value is not None))
    max_new_tokens: int | None = field(default=None, metadata=_option(
        help="decode steps for --task generate; none given: 16 there, 0 elsewhere", parse=int, report=_same))
    inputs: Callable[[int, int], dict[str, Any]] | None = field(default=None, metadata=_option(
        help="(batch_size, seq_len) -> the model's keyword inputs; on the command line path/to/file.py:function"))
    loss: Callable[[Any], torch.Tensor] | None = field(default=None, metadata=_option(
        help="the model's output -> the loss to minimise; on the command line path/to/file.py:function"))
    model_class: str | None = field(default=None, metadata=_option(
        help="transformers class, e.g. AutoModelForSequenceClassification"))
    trust_remote_code: bool = field(default=False, metadata=_option(help="allow code from the model's Hub repository"))
    expandable_segments: bool = field(default=False, metadata=_option(
        help="model PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the allocator replay", commands=("trace",)))
    headroom: float = field(default=0.10, metadata=_option(
        help="share of device memory kept free when judging whether the job fits", parse=float, commands=("trace",)))
    gpus: int = field(default=1, metadata=_option(
        help="data-parallel ranks: DDP replicas, or the ranks --zero / --fsdp shard over (estimators/sharding.py)",
        parse=int, report=_same))
    zero: int = field(default=0, metadata=_option(
        help="DeepSpeed ZeRO stage: 0 (none), 1 (optimizer states), 2 (+ gradients), 3 (+ weights) sharded "
        "over --gpus", parse=int, report=_same))
    fsdp: str = field(default="no", metadata=_option(
        help="FSDP2 fully_shard per block: full (reshard_after_forward=True, FULL_SHARD), grad-op (False, "
        "SHARD_GRAD_OP) or no", report=_same))
    gradient_as_bucket_view: bool = field(default=False, metadata=_option(
        help="DDP's gradient_as_bucket_view=True: each .grad is a view into its gradient bucket (DDP only)",
        report=_same))
    moe_routing: str = field(default="balanced", metadata=_option(
        help="load MoE routers give experts: balanced, worst-case or capacity:F (tracer/data_dependent/)", report=_same))
    steps: int = field(default=2, repr=False, metadata=_option(
        help="steps run; the last one is the steady state that is reported", cli=False))

    @property
    def sharding(self) -> ShardingPlan:
        """The data-parallel plan of ``gpus``, ``zero`` and ``fsdp`` (checked in ``__post_init__``)."""
        return sharding_plan(self.gpus, self.zero, self.fsdp, self.gradient_as_bucket_view)

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
        elif self.max_new_tokens and self.task != "generate":
            raise ConfigError(f"max_new_tokens is for --task generate; --task {self.task} decodes no new tokens")
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
        try:
            sharding = sharding_plan(self.gpus, self.zero, self.fsdp, self.gradient_as_bucket_view)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.fsdp = sharding.fsdp
        if (sharding.zero or sharding.fsdp != "no") and self.task != "train":
            raise ConfigError(f"--zero / --fsdp shard training state; --task {self.task} has none (use --gpus alone)")
        if sharding.bucket_view and (sharding.gpus == 1 or self.task != "train"):
            raise ConfigError("gradient_as_bucket_view shapes DDP's gradient buckets: it needs --task train and --gpus N > 1")
        if self.task != "train" and self.optimizer not in (None, "adamw"):
            raise ConfigError(f"optimizer {_optimizer_name(self.optimizer)} is for training; --task {self.task} takes no step")
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
