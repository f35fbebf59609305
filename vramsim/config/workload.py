"""What runs: the task, its batch and sequences, the target device, the model and its inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vramsim import model_zoo
from vramsim.config.checks import check_count
from vramsim.config.options import COMMANDS, as_is, option
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.devices import get_device

__all__ = [
    "ATTN_IMPLEMENTATIONS",
    "DEFAULT_NEW_TOKENS",
    "DEFAULT_SEQ_LEN",
    "MAX_BATCH",
    "MAX_SEQ_LEN",
    "TASKS",
    "UNTRACED_ATTENTION",
    "Task",
    "TorchAutograd",
    "WorkloadOptions",
    "default_task",
]

Task = Literal["train", "forward", "generate"]
TASKS = ("train", "forward", "generate")
TorchAutograd = Literal["installed", "1.10"]
MAX_SEQ_LEN = 1 << 22
"""Longer sequences than 4M tokens are rejected: no model is trained at that length today."""
DEFAULT_SEQ_LEN = 512
"""Tokens per sequence when none is given and the model's positions allow it; a learned position table shorter
than that (CLIP's 77, Whisper's 448) sets the default to what it holds: ``workload.positions.default_seq_len``."""
DEFAULT_NEW_TOKENS = 16
"""Decode steps of ``task="generate"`` when none is given: enough steps for the cache's growth to show."""
MAX_BATCH = 1 << 20
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flash_attention_3")
"""transformers' ``attn_implementation`` names vramsim traces (of ``ALL_ATTENTION_FUNCTIONS`` plus ``eager``)."""
UNTRACED_ATTENTION = {
    "flex_attention": "torch's flex_attention refuses meta tensors ('FlexAttention is only supported on CUDA, CPU, "
    "HPU, or MPS devices'); use sdpa, eager or flash_attention_2"
}
"""transformers' other names, each with why it is not modelled."""


def default_task(source: object) -> Task:
    """The task when none is given: ``generate`` for a diffusion pipeline (a bundled pipeline id or a folder with a
    ``model_index.json``), whose question is the memory of an image; ``train`` for a model. Read without torch."""
    if isinstance(source, (str, Path)):
        text = str(source)
        folder = model_zoo.find_pipeline(text) or Path(text).expanduser()
        if (folder / "model_index.json").is_file():
            return "generate"
    return "train"


@dataclass(kw_only=True)
class WorkloadOptions:
    """The workload every other group is checked against: ``task`` decides what the others may ask for."""

    task: Task = field(
        default="train",
        metadata=option(
            help="train, forward or generate; none given: generate for a diffusion pipeline, else train",
            defaults=dict.fromkeys(COMMANDS),
        ),
    )
    """The command line's and ``simulate``'s default depends on the model: ``workload.models.with_model_defaults``."""
    batch_size: int = field(default=1, metadata=option(help="sequences per step", parse=int, report=as_is))
    seq_len: int = field(
        default=DEFAULT_SEQ_LEN,
        metadata=option(
            help=f"tokens per sequence; none given: {DEFAULT_SEQ_LEN}, or as many as the model's learned position "
            "table holds (less the new tokens)",
            parse=int,
            report=as_is,
            defaults=dict.fromkeys(COMMANDS),
        ),
    )
    """The command line's and ``simulate``'s default depends on the model: ``workload.models.with_model_defaults``."""
    packed: bool = field(
        default=False,
        metadata=option(
            help="the batch packed padding-free (TRL's packing=True with padding_free, transformers' "
            "DataCollatorWithFlattening): one row of batch_size x seq_len tokens, position_ids restarting every "
            "seq_len tokens, no attention mask (vramsim/workload/packing.py)",
            report=as_is,
        ),
    )
    device: str = field(
        default="h100",
        metadata=option(
            help="target device (vramsim gpus), cpu, or custom:<memory>:<arch> for a GPU the catalog lacks (e.g. "
            "custom:48GiB:sm_89, custom:192GB:gfx942); validate measures on cpu",
            defaults={"validate": "cpu"},
        ),
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata=option(
            help=f"decode steps for --task generate; none given: {DEFAULT_NEW_TOKENS} there, 0 elsewhere", parse=int, report=as_is
        ),
    )
    cache_implementation: str = field(
        default="dynamic",
        metadata=option(
            help="--task generate: transformers' KV cache, dynamic (DynamicCache, grows a token per step) or static "
            "(StaticCache of prompt + new tokens, allocated at the prefill, as generate(cache_implementation='static'))",
            report=as_is,
        ),
    )
    inputs: Callable[[int, int], dict[str, Any]] | None = field(
        default=None,
        metadata=option(help="(batch_size, seq_len) -> the model's keyword inputs; on the command line path/to/file.py:function"),
    )
    model_class: str | None = field(
        default=None, metadata=option(help="transformers class, e.g. AutoModelForSequenceClassification")
    )
    attn_implementation: str | None = field(
        default=None,
        metadata=option(
            help=f"transformers' attention kernel: {', '.join(ATTN_IMPLEMENTATIONS)}; none given: what transformers "
            "picks (sdpa where the model supports it, else eager)"
        ),
    )
    # The report's options name the implementation in force (the model's config after the build), not this request.
    trust_remote_code: bool = field(
        default=False,
        metadata=option(help="run the model's own code (config.json's auto_map), from its Hub repository or folder"),
    )
    torch_autograd: TorchAutograd = field(
        default="installed",
        metadata=option(
            help="whose autograd formulas the trace keeps tensors by: installed (this torch's) or 1.10 (PyTorch before 1.11, "
            "whose softmax and log_softmax saved their input beside their output), for a job on such a stack "
            "(tracer/kernels/legacy_autograd.py)",
            report=as_is,
        ),
    )
    moe_routing: str = field(
        default="balanced",
        metadata=option(
            help="load MoE routers give experts: balanced, worst-case or capacity:F (tracer/data_dependent/)", report=as_is
        ),
    )
    steps: int = field(
        default=2,
        repr=False,
        metadata=option(
            help="steps run; the last one's peak is reported: from 2 steps on a steady state, with 1 the first step's "
            "(a sweep that only asks whether a program traces)",
            cli=False,
        ),
    )

    def check_workload(self) -> None:
        """Choices and counts; ``max_new_tokens`` defaults by task; the routing spec becomes its canonical form."""
        if self.task not in TASKS:
            raise ConfigError(f"unknown task {self.task!r}; choose one of: {', '.join(TASKS)}")
        check_count("batch_size", self.batch_size, MAX_BATCH)
        check_count("seq_len", self.seq_len, MAX_SEQ_LEN)
        get_device(self.device)  # an unknown name is answered here, before anything is traced
        if self.attn_implementation in UNTRACED_ATTENTION:
            reason = UNTRACED_ATTENTION[self.attn_implementation]
            raise UnsupportedError(f"attn_implementation={self.attn_implementation!r} is not modelled: {reason}")
        if self.attn_implementation is not None and self.attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ConfigError(
                f"unknown attn_implementation {self.attn_implementation!r}; choose one of: {', '.join(ATTN_IMPLEMENTATIONS)}"
            )
        if self.packed and self.task == "generate":
            raise ConfigError("packed flattens a training or forward batch; task='generate' decodes one row per prompt")
        if self.max_new_tokens is None:
            self.max_new_tokens = DEFAULT_NEW_TOKENS if self.task == "generate" else 0
        elif self.max_new_tokens and self.task != "generate":
            raise ConfigError(f"max_new_tokens is for task='generate'; task={self.task!r} decodes no new tokens")
        check_count("max_new_tokens", self.max_new_tokens, MAX_SEQ_LEN, allow_zero=self.task != "generate")
        if self.cache_implementation not in ("dynamic", "static"):
            raise ConfigError(f"unknown cache_implementation {self.cache_implementation!r}; choose one of: dynamic, static")
        if self.cache_implementation == "static" and self.task != "generate":
            raise ConfigError(f"cache_implementation='static' is the generate loop's cache; task='{self.task}' keeps none")
        if self.torch_autograd not in ("installed", "1.10"):
            raise ConfigError(f"unknown torch_autograd {self.torch_autograd!r}; choose one of: installed, 1.10")
        if self.moe_routing != "balanced":  # the default is canonical; parsing another loads torch
            try:
                from vramsim.tracer.data_dependent import parse_routing

                self.moe_routing = parse_routing(self.moe_routing).spec
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        if self.steps < 1:
            raise ConfigError(f"steps must be at least 1, got {self.steps}")
