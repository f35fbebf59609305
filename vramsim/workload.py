"""The program whose memory is predicted: one training or inference step, run twice.

The same code runs on the meta device under the tracer and on the CPU for real when
validating, so a prediction and its measurement are of one and the same program.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from vramsim.tracer.categories import Category, Phase

from .errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    from .checkpointing import UnitMarker

__all__ = ["StepObserver", "Workload", "run_workload", "tensors_in"]


class StepObserver(Protocol):
    """What the workload tells whoever watches it: step bounds, phases and tensor roles."""

    def begin_step(self, step: int) -> None: ...
    def end_step(self) -> None: ...
    def set_phase(self, phase: Phase) -> None: ...
    def mark(self, tensors: Any, category: Category) -> None: ...
    def mark_owned(self, owned: Any, category: Category) -> None:
        """``owned``: ``(parameter name, tensor)`` pairs (gradients, optimizer states)."""
    def begin_unit(self, module: str, tensors: Any) -> None: ...
    def end_unit(self) -> None: ...


@dataclass(kw_only=True)
class Workload:
    """A model with everything needed to run its steps; built on meta or on the CPU alike."""

    model: torch.nn.Module
    task: str
    batch: dict[str, Any]
    loss: Callable[[Any], torch.Tensor] | None
    optimizer: torch.optim.Optimizer | None
    autocast: Callable[[], contextlib.AbstractContextManager[Any]]
    """Enters mixed precision for the forward pass (a null context without it)."""
    max_new_tokens: int
    steps: int
    scaler: torch.amp.GradScaler | None = None
    """fp16 autocast training's loss scaler (the AMP recipe); ``None`` otherwise."""
    saved_tensors: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    """What the forward's saved tensors go through (``save_on_cpu`` to offload them)."""
    units: UnitMarker | None = None
    """Reports the blocks a checkpoint would wrap, where the traced program marks them."""


def run_workload(work: Workload, observer: StepObserver) -> None:
    """Run ``work.steps`` steps; the last one is the steady state."""
    observer.mark(work.batch.values(), Category.INPUT)
    step_fn = {"train": _train_step, "forward": _forward_step, "generate": _generate_step}[work.task]
    if work.units is not None:
        work.units.observer = observer
    try:
        for step in range(work.steps):
            observer.begin_step(step)
            step_fn(work, observer)
            observer.end_step()
    finally:
        if work.units is not None:
            work.units.observer = None


def _train_step(work: Workload, observer: StepObserver) -> None:
    """Forward, backward, optimizer step, ``zero_grad(set_to_none=True)``.

    The model's outputs are dropped once the loss is computed, as the Hugging Face Trainer
    does, so logits do not stay live through backward unless autograd saved them. With a
    scaler the step is torch.amp's recipe: ``scaler.scale(loss).backward()``,
    ``scaler.step(optimizer)`` (unscale, inf check, step), ``scaler.update()``.
    """
    observer.set_phase(Phase.FORWARD)
    with work.autocast(), work.saved_tensors():
        loss = _compute_loss(work, observer)
    observer.set_phase(Phase.BACKWARD)
    (work.scaler.scale(loss) if work.scaler is not None else loss).backward()
    params = [(name, p) for name, p in work.model.named_parameters() if p.grad is not None]
    observer.mark_owned(((name, p.grad) for name, p in params), Category.GRADIENT)
    del loss
    if work.optimizer is not None:
        observer.set_phase(Phase.OPTIMIZER)
        _optimizer_step(work.optimizer, work.scaler)
        names = {id(p): name for name, p in work.model.named_parameters()}
        observer.mark_owned(
            ((names.get(id(p), ""), t) for p, state in work.optimizer.state.items() for t in tensors_in(state)),
            Category.OPTIMIZER_STATE,
        )
        if work.scaler is not None:
            observer.mark(tensors_in(work.scaler), Category.OPTIMIZER_STATE)
        work.optimizer.zero_grad(set_to_none=True)
    else:
        for _, param in params:
            param.grad = None


def _optimizer_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
    if scaler is None:
        optimizer.step()
        return
    scaler.step(optimizer)
    scaler.update()


def _compute_loss(work: Workload, observer: StepObserver) -> torch.Tensor:
    outputs = work.model(**work.batch)
    observer.mark(tensors_in(outputs), Category.OUTPUT)
    if work.loss is not None:
        loss = work.loss(outputs)
    elif getattr(outputs, "loss", None) is not None:
        loss = outputs.loss
    else:
        raise UnsupportedError(
            f"{type(work.model).__name__} returned no loss to train on; pass loss=lambda outputs: ... "
            "or a model class with a head (e.g. --model-class AutoModelForCausalLM)"
        )
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ConfigError("the loss must be a scalar tensor")
    return loss


def _forward_step(work: Workload, observer: StepObserver) -> None:
    observer.set_phase(Phase.FORWARD)
    with torch.no_grad(), work.autocast():
        outputs = work.model(**work.batch)
        observer.mark(tensors_in(outputs), Category.OUTPUT)
        del outputs


def _generate_step(work: Workload, observer: StepObserver) -> None:
    """Greedy decoding with the model's own cache: a prefill, then one token per step.

    ``model.generate`` is not used because its stopping checks read tensor values, which the
    meta device does not have; the memory of the loop is the same.
    """
    from transformers import DynamicCache

    observer.set_phase(Phase.FORWARD)
    model = work.model
    accepted = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    with torch.no_grad(), work.autocast():
        cache = DynamicCache(config=model.config)
        extra["cache" if "cache" in accepted else "past_key_values"] = cache
        outputs = model(**work.batch, use_cache=True, **extra)
        for _ in range(work.max_new_tokens - 1):
            observer.mark(tensors_in(cache), Category.KV_CACHE)
            next_ids = outputs.logits[:, -1:].argmax(dim=-1)
            del outputs
            outputs = model(input_ids=next_ids, use_cache=True, **extra)
        observer.mark(tensors_in(cache), Category.KV_CACHE)
        del outputs, cache, extra


def tensors_in(obj: Any, _depth: int = 0) -> Iterator[torch.Tensor]:
    """Every tensor reachable from ``obj`` through containers and plain object attributes."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif _depth > 6 or obj is None or isinstance(obj, (str, bytes, int, float, bool, torch.nn.Module)):
        return
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from tensors_in(value, _depth + 1)
    elif isinstance(obj, (list, tuple, set)):
        for value in obj:
            yield from tensors_in(value, _depth + 1)
    elif hasattr(obj, "__dict__"):
        yield from tensors_in(vars(obj), _depth + 1)
