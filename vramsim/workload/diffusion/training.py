"""One training step of a diffusion pipeline's denoiser, as diffusers' own training scripts run it.

The scripts (``examples/text_to_image/train_text_to_image.py``, ``examples/dreambooth/
train_dreambooth_lora_sdxl.py``, ``train_dreambooth_lora_flux.py``, ``train_dreambooth_(lora_)sd3.py``) keep the frozen components
(text encoders, VAE) in ``weight_dtype`` (the ``--mixed_precision`` dtype, else fp32), train the
denoiser (all of it in fp32, or LoRA adapters added with ``add_adapter``) and run, per step: the
VAE encode of the pixel batch with no gradient, latents scaled, noise and timesteps, the prompt
through the frozen text encoders, the denoiser's forward under accelerate's autocast, an MSE loss
(noise for epsilon-prediction UNets, ``noise - latents`` for FLUX, the preconditioned prediction against the
latents for SD3), backward
and the optimizer step. ``cache_latents`` and ``cache_text_embeddings`` are the scripts'
``--cache_latents`` and precomputed prompt embeddings: the VAE or the text encoders are then not on
the device, their outputs are. ``ema`` is the scripts' ``--use_ema``: diffusers' ``EMAModel`` keeps an fp32 copy
of the trained weights and updates it after each optimizer step. A pipeline is trained once it has a ``Recipe``
in ``RECIPES`` (``recipes.py``); this module builds its program.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Literal

import torch

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import SCRIPT_MAX_GRAD_NORM
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.workload.checkpointing import UnitMarker, apply_checkpointing, install_unit_marker
from vramsim.workload.diffusion.components import diffusers_model, load_scheduler
from vramsim.workload.diffusion.recipes import RECIPES
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.diffusion.training_batch import training_batch, training_resolution
from vramsim.workload.diffusion.training_report import training_notes, training_phases
from vramsim.workload.diffusion.training_step import Recipe, TrainingStep
from vramsim.workload.models import build_model, load_config
from vramsim.workload.optimizers import make_optimizer
from vramsim.workload.program import Program

__all__ = ["build_training_program"]


def build_training_program(
    spec: PipelineSpec,
    config: SimulationConfig,
    *,
    device: str,
    emulation: KernelEmulation | None,
    foreach: bool,
    checkpointing: Literal["marked", "applied"],
) -> Program:
    """The frozen components in ``weight_dtype``, the denoiser trained (fully, or its LoRA adapters), a pixel batch."""
    recipe = RECIPES.get(spec.class_name)
    if recipe is None:
        raise UnsupportedError(f"{spec.class_name} is not trained yet; pipelines trained: {', '.join(RECIPES)}")
    _check(config)
    mixed = config.mixed_precision
    assert not isinstance(mixed, str), "SimulationConfig resolves dtype names"
    weight_dtype = mixed or torch.float32
    cached = tuple(
        name for name, on in (("latents", config.cache_latents), ("text_embeddings", config.cache_text_embeddings)) if on
    )
    modules = _components(spec, recipe, config, device, weight_dtype, upcast_lora=mixed == torch.float16)
    denoiser = modules[spec.denoiser]
    units = _checkpointing(denoiser, config, emulation, checkpointing)
    batch = training_batch(spec, recipe, config, device, denoiser, weight_dtype)
    optimizer = make_optimizer(denoiser, config.optimizer, foreach=foreach)
    if optimizer is None:
        raise ConfigError("a training step needs an optimizer; optimizer=None takes no step")
    scaler = torch.amp.GradScaler(torch.device(device).type) if mixed == torch.float16 else None
    ema = _ema(denoiser) if config.ema else None
    height, width = training_resolution(spec, config, denoiser)
    step = TrainingStep(
        spec=spec,
        recipe=recipe,
        scheduler=load_scheduler(spec, recipe.noise_scheduler),
        weight_dtype=weight_dtype,
        cached=cached,
        lora=config.lora is not None,
        resolution=(height, width),
        ema=ema,
    )
    max_grad_norm = SCRIPT_MAX_GRAD_NORM if config.max_grad_norm is None else config.max_grad_norm
    return Program(
        modules=modules,
        step=step,
        batch=batch,
        loss=None,
        optimizer=optimizer,
        autocast=_autocast(mixed, device, emulation),
        max_new_tokens=0,
        steps=config.steps,
        scaler=scaler,
        units=units,
        max_grad_norm=max_grad_norm,
        phases=training_phases(modules),
        notes=training_notes(step, denoiser, max_grad_norm),
        options={"height": height, "width": width},
    )


def _components(
    spec: PipelineSpec, recipe: Recipe, config: SimulationConfig, device: str, weight_dtype: torch.dtype, *, upcast_lora: bool
) -> dict[str, torch.nn.Module]:
    """The frozen text encoders (unless their embeddings are cached), the denoiser to train, the frozen VAE (unless
    the latents are cached)."""
    modules: dict[str, torch.nn.Module] = {}
    if not config.cache_text_embeddings:
        for name in ("text_encoder", "text_encoder_2", "text_encoder_3"):
            if spec.has(name):
                encoder = build_model(load_config(spec.component(name)), device=device, dtype=weight_dtype)
                modules[name] = encoder.eval().requires_grad_(False)
    lora = config.lora is not None
    denoiser = diffusers_model(spec, spec.denoiser, device, weight_dtype if lora else torch.float32)
    denoiser.requires_grad_(not lora).train()
    if lora:
        _add_lora(denoiser, config.lora, upcast=upcast_lora, targets=recipe.lora_targets)
    modules[spec.denoiser] = denoiser
    vae_dtype = torch.float32 if recipe.vae_fp32 else weight_dtype
    vae = None if config.cache_latents else diffusers_model(spec, "vae", device, vae_dtype).requires_grad_(False)
    if vae is not None:
        modules["vae"] = vae
    return modules


def _checkpointing(
    denoiser: torch.nn.Module,
    config: SimulationConfig,
    emulation: KernelEmulation | None,
    checkpointing: Literal["marked", "applied"],
) -> UnitMarker | None:
    """The denoiser's checkpointing applied, or (``marked``) its blocks marked for the graph to compute each choice."""
    plan = parse_checkpointing(config.checkpointing)
    if checkpointing == "applied" and plan.kind == "all":
        raise ConfigError("checkpointing='all' compares the choices from one trace; a real run takes one choice")
    if checkpointing == "marked":
        return install_unit_marker(denoiser)
    apply_checkpointing(denoiser, plan, emulation)
    return None


def _ema(denoiser: torch.nn.Module) -> Any:
    """``EMAModel(unet.parameters(), ...)`` as train_text_to_image.py makes it (``foreach`` off, its default): a clone of
    every trained weight, in the trained weights' fp32, on the device (``ema_unet.to(accelerator.device)``)."""
    from diffusers.training_utils import EMAModel

    return EMAModel(denoiser.parameters(), foreach=False)


def _check(config: SimulationConfig) -> None:
    """What a pipeline's training step does not take, in one line each."""
    if config.dtype is not None:
        raise ConfigError(
            "training a pipeline casts as diffusers' scripts do: the frozen components in the "
            "--mixed-precision dtype (else fp32), the trained weights in fp32; drop --dtype"
        )
    taken = {
        "quantization": config.quantization is not None,
        "compile": config.compile,
        "grad_accum": config.grad_accum > 1,
        "offload": config.offload != "no",
        "gpus": config.gpus > 1,
        "inputs": config.inputs is not None,
        "loss": config.loss is not None,
        "zero": config.zero > 0,
        "fsdp": config.fsdp != "no",
        "offload_states": config.offload_states != "none",
        "keep_outputs": config.keep_outputs,
    }
    named = [name for name, on in taken.items() if on]
    if named:
        raise UnsupportedError(f"training a diffusion pipeline with {', '.join(named)} is not modelled yet")
    if config.ema and config.lora is not None:
        raise ConfigError(
            "ema averages a full fine-tune's weights (the scripts' --use_ema); the LoRA scripts keep no EMA, drop ema or lora"
        )
    if parse_checkpointing(config.checkpointing).kind not in ("none", "full", "every", "all"):
        raise UnsupportedError(
            f"checkpointing={config.checkpointing!r} is not modelled for a pipeline's denoiser; "
            "use full (the scripts' --gradient_checkpointing) or every:K"
        )


def _add_lora(denoiser: Any, lora: Any, *, upcast: bool, targets: tuple[str, ...]) -> None:
    """``denoiser.add_adapter(LoraConfig(r, lora_alpha, init_lora_weights="gaussian", target_modules))`` as the scripts
    do (frozen base, adapters trainable); with fp16 mixed precision ``cast_training_params`` upcasts the adapters to fp32."""
    import peft
    from diffusers.training_utils import cast_training_params

    arguments = dict(lora.to_dict()) if isinstance(lora, peft.PeftConfig) else dict(lora)
    if arguments.get("target_modules") in (None, "all-linear"):
        arguments["target_modules"] = list(targets)
    arguments.setdefault("init_lora_weights", "gaussian")
    known = set(peft.LoraConfig.__dataclass_fields__)
    try:
        denoiser.add_adapter(peft.LoraConfig(**{k: v for k, v in arguments.items() if k in known and k != "peft_type"}))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"LoRA cannot be applied to the denoiser: {exc}") from exc
    if upcast:
        cast_training_params(denoiser, dtype=torch.float32)


def _autocast(dtype: torch.dtype | None, device: str, emulation: KernelEmulation | None) -> Callable[[], Any]:
    """accelerate's autocast around the prepared denoiser's forward; the frozen components run outside it."""
    if dtype is None:
        return contextlib.nullcontext
    if emulation is not None:
        return lambda: emulation.autocast(dtype)
    return lambda: torch.autocast(device, dtype=dtype)
