"""The program whose memory is predicted: named modules and the step that runs them, run twice.

The same code runs on the meta device under the tracer and on the CPU for real when
validating, so a prediction and its measurement are of one and the same program.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.optimizer_in_backward import OptimizerInBackward
from vramsim.workload.quiet import quiet_default_loss

if TYPE_CHECKING:
    from vramsim.results.report import Assumption
    from vramsim.workload.checkpointing import UnitMarker
    from vramsim.workload.compiled import CompiledGraphs

__all__ = ["STEPS", "Program", "Step", "StepObserver", "clip_gradients", "optimizer_step", "run_program", "tensors_in"]


class StepObserver(Protocol):
    """What the workload tells whoever watches it: step bounds, phases and tensor roles."""

    def begin_step(self, step: int) -> None: ...
    def end_step(self) -> None: ...
    def set_phase(self, phase: Phase) -> None: ...
    def mark(self, tensors: Any, category: Category) -> None: ...
    def mark_owned(self, owned: Any, category: Category) -> None:
        """``owned``: ``(parameter name, tensor)`` pairs (gradients, optimizer states)."""

    def begin_unit(self, module: str, tensors: Any, positional: Any = ()) -> None: ...
    def end_unit(self) -> None: ...


Step = Callable[["Program", StepObserver], None]
"""One step of a program: what it runs, observed (phases, roles, checkpointable blocks)."""


@dataclass(kw_only=True)
class Program:
    """Named modules, the step that runs them, and what the step needs; built on meta or on the CPU alike.

    One model is ``modules={"": model}``; a diffusion pipeline names its text encoders, denoiser
    and VAE, a serving engine its model. Module paths in the trace are ``name.path`` (just
    ``path`` for the unnamed single model).
    """

    modules: dict[str, torch.nn.Module]
    step: Step
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
    warnings: list[str] = field(default_factory=list)
    """What the real run may do differently from the traced one (positions past the configured maximum)."""
    weights_from: str = "as built"
    """Where the weights' dtype came from: given, the checkpoint's config, the default, or as built."""
    static_cache: bool = False
    """Generate into transformers' ``StaticCache`` (prompt + new tokens, allocated at the prefill)
    instead of the ``DynamicCache`` that grows by a token per step."""
    grad_accum: int = 1
    """Micro-steps per optimizer step: each runs forward and backward, gradients add up in ``.grad``."""
    max_grad_norm: float | None = None
    """Clip the gradients' total norm with ``torch.nn.utils.clip_grad_norm_`` before the step."""
    keep_outputs: bool = False
    """Hold the model's outputs (logits) through backward, as ``out = model(**batch); out.loss.backward()`` does."""
    compiled: CompiledGraphs | None = None
    """The model runs ``torch.compile``d, its partitioned graphs interpreted on meta (``vramsim/workload/compiled.py``)."""
    phases: dict[str, str] = field(default_factory=dict)
    """The phase each named module runs in (a pipeline's ``encode_prompt``, ``denoise``, ``decode``), as its builder
    knows it; empty for a single model."""
    notes: list[Assumption] = field(default_factory=list)
    """What the builder's step assumes, for the report; empty where the run's own notes apply (a single model)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The builder's arguments in force beyond the config (a pipeline call's, its defaults filled in), for the report."""

    @property
    def model(self) -> torch.nn.Module:
        """The module a single-model step runs: the one named ``""``."""
        return self.modules[""]

    @property
    def name(self) -> str:
        """What error messages call the program: the model's class, or the modules' names."""
        if list(self.modules) == [""]:
            return type(self.model).__name__
        return "+".join(self.modules)


def run_program(program: Program, observer: StepObserver) -> None:
    """Run ``program.steps`` steps; the last one is the steady state."""
    observer.mark(program.batch.values(), Category.INPUT)
    if program.units is not None:
        program.units.observer = observer
    try:
        for step in range(program.steps):
            observer.begin_step(step)
            program.step(program, observer)
            observer.end_step()
    finally:
        if program.units is not None:
            program.units.observer = None


def _train_step(program: Program, observer: StepObserver) -> None:
    """``grad_accum`` micro-steps of forward and backward, then clipping, the optimizer step and
    ``zero_grad(set_to_none=True)``.

    The model's outputs are dropped once the loss is computed, as the Hugging Face Trainer
    does, so logits do not stay live through backward unless autograd saved them; with
    ``keep_outputs`` they are held until backward ends, as the plain loop holds ``out``. With
    several micro-steps each loss is divided by their count before backward (the Trainer's
    ``loss / gradient_accumulation_steps``). With a scaler the step is torch.amp's recipe:
    ``scaler.scale(loss).backward()``, ``scaler.unscale_`` before clipping, ``scaler.step(optimizer)``
    (unscale, inf check, step), ``scaler.update()``. An ``OptimizerInBackward`` steps each parameter
    inside backward, told the observer for the gradients' roles, and frees each gradient there.
    """
    if isinstance(program.optimizer, OptimizerInBackward):
        program.optimizer.observer = observer  # the gradients' roles, told before each step frees its own
    for _ in range(program.grad_accum):
        observer.set_phase(Phase.FORWARD)
        with program.autocast(), program.saved_tensors():
            outputs, loss = _compute_loss(program, observer)
            if not program.keep_outputs:
                outputs = None
        if program.grad_accum > 1:
            loss = loss / program.grad_accum
        observer.set_phase(Phase.BACKWARD)
        (program.scaler.scale(loss) if program.scaler is not None else loss).backward()
        params = [(name, p) for name, p in program.model.named_parameters() if p.grad is not None]
        observer.mark_owned(((name, p.grad) for name, p in params), Category.GRADIENT)
        del loss, outputs
    if program.max_grad_norm is not None:
        observer.set_phase(Phase.OPTIMIZER)
        clip_gradients(program, [p for _, p in params], program.max_grad_norm)
    if program.optimizer is not None:
        observer.set_phase(Phase.OPTIMIZER)
        optimizer_step(program.optimizer, program.scaler)
        names = {id(p): name for name, p in program.model.named_parameters()}
        observer.mark_owned(
            ((names.get(id(p), ""), t) for p, state in program.optimizer.state.items() for t in tensors_in(state)),
            Category.OPTIMIZER_STATE,
        )
        if program.scaler is not None:
            observer.mark(tensors_in(program.scaler), Category.OPTIMIZER_STATE)
        program.optimizer.zero_grad(set_to_none=True)
        if isinstance(program.optimizer, OptimizerInBackward):
            program.optimizer.observer = None
    else:
        for _, param in params:
            param.grad = None


def clip_gradients(program: Program, params: list[torch.nn.Parameter], max_norm: float) -> None:
    """``clip_grad_norm_`` as torch picks it: foreach (``_foreach_norm``, ``_foreach_mul_``) on CPU and
    CUDA tensors; gradients scaled for fp16 are unscaled first, as accelerate does before clipping."""
    if program.scaler is not None and program.optimizer is not None:
        program.scaler.unscale_(program.optimizer)
    torch.nn.utils.clip_grad_norm_(params, max_norm)


def optimizer_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
    """``optimizer.step()``, or with a loss scaler torch.amp's ``scaler.step(optimizer)`` and ``scaler.update()``."""
    if scaler is None:
        optimizer.step()
        return
    scaler.step(optimizer)
    scaler.update()


def _compute_loss(program: Program, observer: StepObserver) -> tuple[Any, torch.Tensor]:
    """The model's outputs and the loss to minimise: ``loss(outputs)`` where given, else the model's own."""
    with quiet_default_loss():
        outputs = program.model(**program.batch)
    observer.mark(tensors_in(outputs), Category.OUTPUT)
    loss = program.loss(outputs) if program.loss is not None else _own_loss(outputs)
    if loss is None:
        raise UnsupportedError(
            f"{type(program.model).__name__} returned no loss to train on (a 0-dim tensor, .loss or ['loss']); "
            "pass loss=lambda outputs: ... or a model class with a head (e.g. --model-class AutoModelForCausalLM)"
        )
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ConfigError("the loss must be a scalar tensor")
    return outputs, loss


def _own_loss(outputs: Any) -> Any:
    """The loss a forward returns itself: a 0-dim tensor (a training module's ``return F.cross_entropy(...)``),
    a ``ModelOutput``'s ``.loss`` or a dict's ``"loss"``; None when it returns none."""
    if isinstance(outputs, torch.Tensor):
        return outputs if outputs.dim() == 0 else None
    if isinstance(outputs, dict):
        return outputs.get("loss")
    return getattr(outputs, "loss", None)


def _forward_step(program: Program, observer: StepObserver) -> None:
    """One pass under ``no_grad``; the KV cache it returns (``past_key_values``) is kept apart from the logits."""
    observer.set_phase(Phase.FORWARD)
    with torch.no_grad(), program.autocast():
        outputs = program.model(**program.batch)
        observer.mark(tensors_in(_returned_cache(outputs)), Category.KV_CACHE)
        observer.mark(tensors_in(outputs), Category.OUTPUT)
        del outputs


def _returned_cache(outputs: Any) -> Any:
    """The cache a transformers model returns: the output's ``cache`` (``past_key_values`` before
    transformers 5.2x, whose alias now logs a deprecation); None for other outputs."""
    if not isinstance(outputs, dict):
        return None
    return next((value for key, value in outputs.items() if key in ("cache", "past_key_values")), None)


def _dynamic_cache(model: torch.nn.Module) -> Any:
    """The cache ``generate`` gives a decoder: transformers 5's ``DynamicCache`` takes the config (its layers'
    kinds); 4.42's takes nothing, and there a model without ``_supports_cache_class`` (GPT-2) returns legacy
    tuples of its own (None)."""
    from transformers import DynamicCache

    config: Any = model.config
    if "config" in inspect.signature(DynamicCache.__init__).parameters:
        return DynamicCache(config=config)
    return DynamicCache() if getattr(model, "_supports_cache_class", False) else None


def _generate_step(program: Program, observer: StepObserver) -> None:
    """Greedy decoding with the model's own cache: a prefill, then one token per step.

    ``model.generate`` is not used because its stopping checks read tensor values, which the
    meta device does not have; the memory of the loop is the same.
    """
    from transformers import StaticCache

    observer.set_phase(Phase.FORWARD)
    model = program.model
    accepted = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    cache_key = "cache" if "cache" in accepted else "past_key_values"
    encoder_decoder = "decoder_input_ids" in program.batch
    prompt = program.batch["input_ids"].shape[-1] if program.static_cache else 0
    with torch.no_grad(), program.autocast():
        model_config: Any = model.config
        if program.static_cache:  # positions given: a static cache's length would be read from its values
            extra[cache_key] = StaticCache(config=model_config, max_cache_len=prompt + program.max_new_tokens)
            extra["cache_position"] = torch.arange(prompt, device=program.batch["input_ids"].device)
        elif not encoder_decoder and (dynamic := _dynamic_cache(model)) is not None:
            extra[cache_key] = dynamic  # an encoder-decoder builds its own EncoderDecoderCache (self and cross attention)
        outputs = model(**program.batch, use_cache=True, **extra)
        cache = extra.get(cache_key) or _returned_cache(outputs)
        extra[cache_key] = cache
        if encoder_decoder:  # the decoder reads the encoder's output, computed once
            extra["encoder_outputs"] = (outputs.encoder_last_hidden_state,)
        for _ in range(program.max_new_tokens - 1):
            observer.mark(tensors_in(cache), Category.KV_CACHE)
            next_ids = outputs.logits[:, -1:].argmax(dim=-1)
            del outputs
            if program.static_cache:
                extra["cache_position"] = extra["cache_position"][-1:] + 1
            outputs = model(**{"decoder_input_ids" if encoder_decoder else "input_ids": next_ids}, use_cache=True, **extra)
            if isinstance(cache, tuple):  # a legacy cache (transformers 4.42's GPT-2): each step returns a new one
                cache = extra[cache_key] = _returned_cache(outputs)
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


STEPS: dict[str, Step] = {"train": _train_step, "forward": _forward_step, "generate": _generate_step}
"""The single-model steps, by task."""
