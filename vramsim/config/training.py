"""The training step: its optimizer, accumulation, clipping, kept outputs, loss and compilation."""

from __future__ import annotations

from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vramsim.config.checks import check_count
from vramsim.config.choices import OPTIMIZERS, canonical_optimizer, parse_loss
from vramsim.config.options import as_is, option
from vramsim.config.recipes import RECIPE_DEFAULT
from vramsim.config.workload import WorkloadOptions
from vramsim.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    import torch

__all__ = ["TrainingOptions"]


def _optimizer_name(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else "custom"


def _optimizer_flag(text: str) -> str | None:
    """``--optimizer``: a name, checked here so that a command-line user is not offered a callable."""
    if text.lower() == "none":
        return None
    if text == RECIPE_DEFAULT:
        return text
    if canonical_optimizer(text) is None:
        raise ArgumentTypeError(f"unknown optimizer {text!r}; choose one of: {', '.join(OPTIMIZERS)}, or none")
    return text


@dataclass(kw_only=True)
class TrainingOptions:
    """How a training step updates the weights; none of it applies to another task."""

    optimizer: str | Callable[..., torch.optim.Optimizer] | None = field(
        default=RECIPE_DEFAULT,
        metadata=option(
            help=f"{', '.join(OPTIMIZERS)} or none (vramsim/workload/optimizers.py); adamw: fused AdamW; "
            "transformers' optim names work too; Python: also a callable params -> Optimizer; none given: the "
            "recipe's (the Trainer's: adamw)",
            parse=_optimizer_flag,
            report=_optimizer_name,
        ),
    )
    grad_accum: int = field(
        default=1,
        metadata=option(
            help="gradient accumulation: micro-steps of --batch-size each per optimizer step; gradients add up in .grad",
            parse=int,
            report=as_is,
        ),
    )
    max_grad_norm: float | None = field(
        default=None,
        metadata=option(
            help="clip gradients to this total norm before the step (torch.nn.utils.clip_grad_norm_, foreach)",
            parse=float,
            report=as_is,
        ),
    )
    optimizer_in_backward: bool = field(
        default=False,
        metadata=option(
            help="the optimizer step fused into backward (torchtune's optimizer_in_bwd): an optimizer per parameter, "
            "stepped by its post-accumulate-grad hook, its gradient freed right after "
            "(vramsim/workload/optimizer_in_backward.py)",
            report=as_is,
        ),
    )
    keep_outputs: bool = field(
        default=False,
        metadata=option(
            help="hold the model's outputs (logits) through backward, as the plain loop out = model(**batch); "
            "out.loss.backward() does; otherwise they are released before backward, as the HF Trainer does",
            report=as_is,
        ),
    )
    loss: Callable[[Any], torch.Tensor] | str | None = field(
        default=RECIPE_DEFAULT,
        metadata=option(
            help="model (its own loss), liger-flce (Liger's fused linear cross-entropy), chunked-ce[:N] (torchtune's, 8 "
            "chunks unless N; vramsim/workload/losses.py), or path/to/file.py:function (Python: a callable output -> loss; "
            "None: the model's own); none given: the recipe's (the Trainer's: model)",
            report=lambda value: value if isinstance(value, str) else ("model" if value is None else "custom"),
        ),
    )
    compile: bool = field(
        default=False,
        metadata=option(
            help="torch.compile the model (train or forward): the saved tensors AOTAutograd's partitioner chooses and "
            "the buffers inductor's own generated wrapper allocates (vramsim/workload/compiled.py)",
            report=as_is,
        ),
    )

    def check_training(self, workload: WorkloadOptions) -> None:
        """Named optimizers and losses become their canonical names; each option here needs task='train'."""
        if isinstance(self.optimizer, str):
            named = canonical_optimizer(self.optimizer)
            if named is None:
                raise ConfigError(
                    f"unknown optimizer {self.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}, "
                    "or pass a callable params -> torch.optim.Optimizer"
                )
            self.optimizer = named
        elif self.optimizer is not None and not callable(self.optimizer):
            raise ConfigError(f"optimizer must be a name or a callable, not {type(self.optimizer).__name__}")
        if workload.task != "train" and self.optimizer not in (None, "adamw"):
            raise ConfigError(
                f"optimizer={_optimizer_name(self.optimizer)!r} is for training; task={workload.task!r} takes no step"
            )
        check_count("grad_accum", self.grad_accum, 1 << 12)
        norm = self.max_grad_norm
        if norm is not None and (isinstance(norm, bool) or not isinstance(norm, (int, float)) or not norm > 0):
            raise ConfigError(f"max_grad_norm must be a number > 0, got {norm!r}")
        if workload.task != "train" and (
            self.grad_accum > 1 or norm is not None or self.keep_outputs or self.optimizer_in_backward
        ):
            raise ConfigError(
                "grad_accum, max_grad_norm, keep_outputs and optimizer_in_backward shape a training step; "
                f"task='{workload.task}' takes none"
            )
        self._check_optimizer_in_backward()
        self._check_loss(workload)

    def _check_optimizer_in_backward(self) -> None:
        """torchtune refuses accumulation and clipping with it (each gradient is gone once its step ran); Muon
        steps its matrices and the rest apart, not one parameter at a time."""
        if not self.optimizer_in_backward:
            return
        if self.optimizer is None:
            raise ConfigError("optimizer_in_backward fuses the optimizer's step into backward; optimizer=none takes none")
        if self.grad_accum > 1 or self.max_grad_norm is not None:
            raise ConfigError(
                "optimizer_in_backward frees each gradient once its step ran: grad_accum and max_grad_norm need them "
                "all (torchtune refuses both with optimizer_in_bwd)"
            )
        if self.optimizer == "muon":
            raise UnsupportedError("optimizer_in_backward with muon is not modelled (Muon pairs two optimizers)")

    def _check_loss(self, workload: WorkloadOptions) -> None:
        """A named loss is a spec string (``model`` is none); it replaces a training step's loss."""
        if not isinstance(self.loss, str):
            if self.loss is not None and not callable(self.loss):
                raise ConfigError(f"loss must be a name or a callable, not {type(self.loss).__name__}")
            return
        named = parse_loss(self.loss)
        self.loss = None if named is None else named.spec
        if named is not None and workload.task != "train":
            raise ConfigError(f"loss={named.spec!r} is a training loss; task={workload.task!r} computes none")
