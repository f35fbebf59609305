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
in ``RECIPES``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import (
    FLUX_TRAINING_GUIDANCE,
    SCRIPT_LORA_TARGETS,
    SCRIPT_MAX_GRAD_NORM,
    SD3_SCRIPT_LORA_TARGETS,
    SD3_SCRIPT_MAX_SEQUENCE_LENGTH,
)
from vramsim.estimators.checkpointing import parse_checkpointing
from vramsim.results.report import Assumption
from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.workload.checkpointing import apply_checkpointing, install_unit_marker
from vramsim.workload.diffusion import flux
from vramsim.workload.diffusion.pipelines import PipelineSpec, _diffusers_model, _scheduler
from vramsim.workload.models import build_model, load_config
from vramsim.workload.optimizers import make_optimizer
from vramsim.workload.program import Program, StepObserver, _clip_gradients, _optimizer_step, tensors_in

__all__ = ["RECIPES", "Recipe", "build_training_program", "is_training", "training_notes", "training_options", "training_phases"]


@dataclass(frozen=True, slots=True)
class Recipe:
    """How a pipeline's denoiser is trained: the script that does it and what differs between pipelines."""

    script: str
    """The diffusers example whose step this is."""
    forward: Callable[[_TrainStep, Program, torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]
    """Noised latents and the prompt's embeddings in, the loss out (with the denoiser's forward under autocast)."""
    encode: Callable[[Program], dict[str, torch.Tensor]]
    """The prompt through the frozen text encoders (``encode_prompt``)."""
    vae_fp32: bool = False
    """The script keeps the VAE in fp32 whatever ``weight_dtype`` is (SDXL's: fp16 VAE latents overflow)."""
    noise_scheduler: str | None = None
    """The scheduler class the script builds from the pipeline's scheduler config (the UNet scripts'
    ``DDPMScheduler.from_pretrained(..., subfolder="scheduler")``); None: the pipeline's own class."""
    lora_targets: tuple[str, ...] = SCRIPT_LORA_TARGETS
    """The modules the script's LoRA adapts when no ``--lora-targets`` are given."""
    max_sequence_length: int | None = None
    """T5's prompt tokens when ``max_sequence_length`` is not given: the script's default (SD3's 77); None: FLUX's
    pipeline default (``flux.max_sequence_length``), or no T5."""


@dataclass(kw_only=True)
class _TrainStep:
    """One optimizer step of the denoiser; the frozen components run without gradients."""

    spec: PipelineSpec
    recipe: Recipe
    scheduler: Any
    weight_dtype: torch.dtype
    cached: tuple[str, ...]
    """What is cached instead of run: ``latents``, ``text_embeddings``."""
    lora: bool
    resolution: tuple[int, int]
    """The pixel batch's height and width."""
    ema: Any = None
    """diffusers' ``EMAModel`` over the trained weights (``--use_ema``); None without it."""

    def __call__(self, program: Program, observer: StepObserver) -> None:
        denoiser = program.modules[self.spec.denoiser]
        observer.set_phase(Phase.FORWARD)
        with torch.no_grad():
            latents = self._latents(program)
            embeds = self._embeds(program)
        loss = self.recipe.forward(self, program, latents, embeds)
        del latents, embeds
        observer.set_phase(Phase.BACKWARD)
        (program.scaler.scale(loss) if program.scaler is not None else loss).backward()
        del loss
        params = [(name, p) for name, p in denoiser.named_parameters() if p.grad is not None]
        observer.mark_owned(((name, p.grad) for name, p in params), Category.GRADIENT)
        observer.set_phase(Phase.OPTIMIZER)
        if program.max_grad_norm is not None:  # set for every pipeline training program
            _clip_gradients(program, [p for _, p in params], program.max_grad_norm)
        assert program.optimizer is not None, "a training program has an optimizer"
        _optimizer_step(program.optimizer, program.scaler)
        names = {id(p): name for name, p in denoiser.named_parameters()}
        observer.mark_owned(
            ((names.get(id(p), ""), t) for p, state in program.optimizer.state.items() for t in tensors_in(state)),
            Category.OPTIMIZER_STATE,
        )
        if program.scaler is not None:
            observer.mark(tensors_in(program.scaler), Category.OPTIMIZER_STATE)
        program.optimizer.zero_grad()  # the scripts' optimizer.zero_grad(): set_to_none, torch's default
        if self.ema is not None:  # after the optimizer step, as train_text_to_image.py calls ema_unet.step
            self.ema.step(denoiser.parameters())
            shadows = zip((name for name, _ in denoiser.named_parameters()), self.ema.shadow_params, strict=True)
            observer.mark_owned(shadows, Category.OPTIMIZER_STATE)

    def _latents(self, program: Program) -> torch.Tensor:
        """``vae.encode(pixel_values).latent_dist.sample()``, shifted and scaled, in ``weight_dtype``; cached:
        the stored distribution's ``sample()``."""
        if "latents" in self.cached:
            sample = program.batch["latent_dist"].sample()
        else:
            vae: Any = program.modules["vae"]
            sample = vae.encode(program.batch["pixel_values"].to(dtype=vae.dtype)).latent_dist.sample()
        config = _vae_config(self.spec)
        shift = config.get("shift_factor") or 0.0
        latents = (sample - shift) * config["scaling_factor"] if shift else sample * config["scaling_factor"]
        return latents.to(self.weight_dtype)

    def _embeds(self, program: Program) -> dict[str, torch.Tensor]:
        """The prompt's embeddings for each image: encoded now, or the precomputed ones repeated to the batch."""
        if "text_embeddings" not in self.cached:
            return self.recipe.encode(program)
        n = _batch_size(program)
        cached = {key[len("cached_") :]: value for key, value in program.batch.items() if key.startswith("cached_")}
        return {key: value.repeat(n, *([1] * (value.ndim - 1))) if key != "txt_ids" else value for key, value in cached.items()}


def _batch_size(program: Program) -> int:
    source = program.batch.get("pixel_values")
    return int(source.shape[0] if source is not None else program.batch["latent_dist"].mean.shape[0])


def _vae_config(spec: PipelineSpec) -> dict[str, Any]:
    import diffusers

    return dict(diffusers.AutoencoderKL.load_config(spec.component("vae")))


# -- what differs between pipelines ------------------------------------------------------------------------------


def _encode_clip(program: Program) -> dict[str, torch.Tensor]:
    """SD: CLIP's last hidden state (``text_encoder(input_ids, return_dict=False)[0]``)."""
    return {"encoder_hidden_states": program.modules["text_encoder"](program.batch["input_ids"], return_dict=False)[0]}


def _encode_sdxl(program: Program) -> dict[str, torch.Tensor]:
    """The SDXL scripts' ``encode_prompt``: both encoders' penultimate hidden states concatenated, the second's pooled output."""
    ids = program.batch["input_ids"]
    hidden: list[torch.Tensor] = []
    pooled: torch.Tensor | None = None
    for name in ("text_encoder", "text_encoder_2"):
        out = program.modules[name](ids, output_hidden_states=True, return_dict=False)
        pooled = out[0]
        hidden.append(out[-1][-2])
        del out
    assert pooled is not None
    return {"encoder_hidden_states": torch.concat(hidden, dim=-1), "text_embeds": pooled.view(ids.shape[0], -1)}


def _encode_flux(program: Program) -> dict[str, torch.Tensor]:
    """The FLUX script's ``encode_prompt``: CLIP's pooled output, T5's last hidden state, zero text ids."""
    clip: Any = program.modules["text_encoder"]
    t5: Any = program.modules["text_encoder_2"]
    pooled = clip(program.batch["input_ids"], output_hidden_states=False).pooler_output.to(dtype=clip.dtype)
    embeds = t5(program.batch["t5_input_ids"])[0].to(dtype=t5.dtype)
    text_ids = torch.zeros(embeds.shape[1], 3, device=embeds.device, dtype=clip.dtype)
    return {"encoder_hidden_states": embeds, "pooled_projections": pooled, "txt_ids": text_ids}


def _encode_sd3(program: Program) -> dict[str, torch.Tensor]:
    """The SD3 scripts' ``encode_prompt``: both CLIPs' penultimate states side by side, padded to T5's width and followed
    by T5's last hidden state; the pooled prompt is both CLIP projections."""
    clip_prompt_embeds_list, clip_pooled_prompt_embeds_list = [], []
    for name in ("text_encoder", "text_encoder_2"):
        encoder: Any = program.modules[name]
        prompt_embeds = encoder(program.batch["input_ids"], output_hidden_states=True)
        pooled_prompt_embeds = prompt_embeds[0]
        prompt_embeds = prompt_embeds.hidden_states[-2].to(dtype=encoder.dtype)
        clip_prompt_embeds_list.append(prompt_embeds)
        clip_pooled_prompt_embeds_list.append(pooled_prompt_embeds)
    clip_prompt_embeds = torch.cat(clip_prompt_embeds_list, dim=-1)
    pooled_prompt_embeds = torch.cat(clip_pooled_prompt_embeds_list, dim=-1)
    t5: Any = program.modules["text_encoder_3"]
    t5_prompt_embed = t5(program.batch["t5_input_ids"])[0].to(dtype=t5.dtype)
    width = t5_prompt_embed.shape[-1] - clip_prompt_embeds.shape[-1]
    clip_prompt_embeds = torch.nn.functional.pad(clip_prompt_embeds, (0, width))
    prompt_embeds = torch.cat([clip_prompt_embeds, t5_prompt_embed], dim=-2)
    return {"encoder_hidden_states": prompt_embeds, "pooled_projections": pooled_prompt_embeds}


def _unet_loss(step: _TrainStep, program: Program, latents: torch.Tensor, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """DDPM's ``add_noise`` at uniform timesteps, the UNet's prediction, ``mse_loss(pred.float(), target.float())``
    against the noise (epsilon) or the velocity (``v_prediction``)."""
    unet: Any = program.modules["unet"]
    scheduler = step.scheduler
    noise = torch.randn_like(latents)
    n = latents.shape[0]
    timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (n,), device=latents.device).long()
    noisy = scheduler.add_noise(latents, noise, timesteps)
    added = None
    if "text_embeds" in embeds:  # SDXL: (original size, crop top-left, target size) per image
        height, width = (side * _vae_scale(step.spec) for side in latents.shape[-2:])
        time_ids = torch.tensor([[height, width, 0, 0, height, width]]).to(latents.device, dtype=step.weight_dtype)
        added = {"time_ids": time_ids.repeat(n, 1), "text_embeds": embeds["text_embeds"]}
    with program.autocast():
        pred = unet(noisy, timesteps, embeds["encoder_hidden_states"], added_cond_kwargs=added, return_dict=False)[0]
    del noisy
    velocity = scheduler.config.prediction_type == "v_prediction"
    target = scheduler.get_velocity(latents, noise, timesteps) if velocity else noise
    return torch.nn.functional.mse_loss(pred.float(), target.float(), reduction="mean")


def _flux_loss(step: _TrainStep, program: Program, latents: torch.Tensor, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """Flow matching: ``(1 - sigma) x + sigma noise`` packed into 2x2 patches, the transformer at ``t / 1000``,
    the prediction unpacked, ``mean(weighting * (pred - (noise - x))**2)`` with the scripts' default weighting
    (``none``: ones)."""
    from diffusers.training_utils import compute_loss_weighting_for_sd3

    pipeline = flux_pipeline()
    transformer: Any = program.modules["transformer"]
    n, channels, height, width = latents.shape
    device, dtype = latents.device, latents.dtype
    image_ids = pipeline._prepare_latent_image_ids(n, height // 2, width // 2, device, dtype)
    noise, timesteps, sigmas, noisy = _flow_noise(step, latents, weighting_scheme="none")
    packed = pipeline._pack_latents(noisy, n, channels, height, width)
    del noisy
    guidance = None
    if transformer.config.guidance_embeds:
        guidance = torch.tensor([FLUX_TRAINING_GUIDANCE], device=device).expand(n)
    with program.autocast():
        pred = transformer(
            hidden_states=packed,
            timestep=timesteps / 1000,
            guidance=guidance,
            pooled_projections=embeds["pooled_projections"],
            encoder_hidden_states=embeds["encoder_hidden_states"],
            txt_ids=embeds["txt_ids"],
            img_ids=image_ids,
            return_dict=False,
        )[0]
    del packed
    scale = _vae_scale(step.spec)
    pred = pipeline._unpack_latents(pred, height=height * scale, width=width * scale, vae_scale_factor=scale)
    weighting = compute_loss_weighting_for_sd3(weighting_scheme="none", sigmas=sigmas)
    target = noise - latents
    loss = torch.mean((weighting.float() * (pred.float() - target.float()) ** 2).reshape(n, -1), 1)
    return loss.mean()


def _flow_noise(step: _TrainStep, latents: torch.Tensor, *, weighting_scheme: str) -> tuple[torch.Tensor, ...]:
    """The flow-matching scripts' noising: timesteps drawn on the host by the weighting scheme's density (which scheme
    does not change the memory), ``get_sigmas`` on the device, ``(1 - sigma) x + sigma noise``. Returns the noise,
    the timesteps, the sigmas and the noisy latents."""
    from diffusers.training_utils import compute_density_for_timestep_sampling

    scheduler = step.scheduler
    n, device, dtype = latents.shape[0], latents.device, latents.dtype
    noise = torch.randn_like(latents)
    u = compute_density_for_timestep_sampling(
        weighting_scheme=weighting_scheme, batch_size=n, logit_mean=0.0, logit_std=1.0, mode_scale=1.29
    )  # on the host
    indices = (u * scheduler.config.num_train_timesteps).long()
    timesteps = scheduler.timesteps[indices].to(device=device)
    # get_sigmas: the schedule to the device, each timestep's index found there (read back with .item(): the
    # indices are the host's here, the device's tensors the same)
    sigmas_all = scheduler.sigmas.to(device=device, dtype=dtype)
    schedule = scheduler.timesteps.to(device)
    sigmas = sigmas_all[indices.to(device)].flatten()
    del sigmas_all, schedule
    sigmas = sigmas.view(n, *([1] * (latents.ndim - 1)))
    noisy = (1.0 - sigmas) * latents + sigmas * noise
    return noise, timesteps, sigmas, noisy


def _sd3_loss(step: _TrainStep, program: Program, latents: torch.Tensor, embeds: dict[str, torch.Tensor]) -> torch.Tensor:
    """The SD3 scripts' flow matching with their defaults: timesteps by ``logit_normal`` density, the MMDiT on the noisy
    latents, the prediction preconditioned (``--precondition_outputs 1``: ``pred * -sigma + noisy``) against the latents,
    ``mean(weighting * (pred - x)**2)`` (``logit_normal``'s weighting: ones)."""
    from diffusers.training_utils import compute_loss_weighting_for_sd3

    transformer: Any = program.modules["transformer"]
    _noise, timesteps, sigmas, noisy = _flow_noise(step, latents, weighting_scheme="logit_normal")  # noise: alive to the loss
    with program.autocast():
        pred = transformer(
            hidden_states=noisy,
            timestep=timesteps,
            encoder_hidden_states=embeds["encoder_hidden_states"],
            pooled_projections=embeds["pooled_projections"],
            return_dict=False,
        )[0]
    pred = pred * (-sigmas) + noisy
    weighting = compute_loss_weighting_for_sd3(weighting_scheme="logit_normal", sigmas=sigmas)
    target = latents
    loss = torch.mean((weighting.float() * (pred.float() - target.float()) ** 2).reshape(target.shape[0], -1), 1)
    return loss.mean()


def flux_pipeline() -> Any:
    from vramsim.workload.diffusion.pipelines import pipeline_class

    return pipeline_class(flux.FLUX_PIPELINES[0])


def _vae_scale(spec: PipelineSpec) -> int:
    return int(2 ** (len(_vae_config(spec)["block_out_channels"]) - 1))


RECIPES: dict[str, Recipe] = {
    "StableDiffusionPipeline": Recipe("examples/text_to_image/train_text_to_image.py", _unet_loss, _encode_clip,
                                      noise_scheduler="DDPMScheduler"),
    "StableDiffusionXLPipeline": Recipe("examples/dreambooth/train_dreambooth_lora_sdxl.py", _unet_loss, _encode_sdxl,
                                        vae_fp32=True, noise_scheduler="DDPMScheduler"),
    "FluxPipeline": Recipe("examples/dreambooth/train_dreambooth_lora_flux.py", _flux_loss, _encode_flux),
    "StableDiffusion3Pipeline": Recipe("examples/dreambooth/train_dreambooth_sd3.py (full) and train_dreambooth_lora_sd3.py",
                                       _sd3_loss, _encode_sd3, vae_fp32=True, lora_targets=SD3_SCRIPT_LORA_TARGETS,
                                       max_sequence_length=SD3_SCRIPT_MAX_SEQUENCE_LENGTH),
}  # fmt: skip
"""The pipelines whose denoiser is trained, by class."""


# -- building ------------------------------------------------------------------------------------------------------


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
    modules: dict[str, torch.nn.Module] = {}
    if not config.cache_text_embeddings:
        for name in ("text_encoder", "text_encoder_2", "text_encoder_3"):
            if spec.has(name):
                encoder = build_model(load_config(spec.component(name)), device=device, dtype=weight_dtype)
                modules[name] = encoder.eval().requires_grad_(False)
    lora = config.lora is not None
    denoiser = _diffusers_model(spec, spec.denoiser, device, weight_dtype if lora else torch.float32)
    denoiser.requires_grad_(not lora).train()
    if lora:
        _add_lora(denoiser, config.lora, upcast=mixed == torch.float16, targets=recipe.lora_targets)
    modules[spec.denoiser] = denoiser
    vae_dtype = torch.float32 if recipe.vae_fp32 else weight_dtype
    vae = None if config.cache_latents else _diffusers_model(spec, "vae", device, vae_dtype).requires_grad_(False)
    if vae is not None:
        modules["vae"] = vae
    plan = parse_checkpointing(config.checkpointing)
    units = None
    if checkpointing == "applied" and plan.kind == "all":
        raise ConfigError("checkpointing='all' compares the choices from one trace; a real run takes one choice")
    if checkpointing == "marked":
        units = install_unit_marker(denoiser)
    else:
        apply_checkpointing(denoiser, plan, emulation)
    batch = _batch(spec, config, device, denoiser, weight_dtype)
    optimizer = make_optimizer(denoiser, config.optimizer, foreach=foreach)
    if optimizer is None:
        raise ConfigError("a training step needs an optimizer; optimizer=None takes no step")
    scaler = torch.amp.GradScaler(torch.device(device).type) if mixed == torch.float16 else None
    ema = _ema(denoiser) if config.ema else None
    return Program(
        modules=modules,
        step=_TrainStep(
            spec=spec,
            recipe=recipe,
            scheduler=_noise_scheduler(spec, recipe),
            weight_dtype=weight_dtype,
            cached=cached,
            lora=lora,
            resolution=_resolution(spec, config, denoiser),
            ema=ema,
        ),
        batch=batch,
        loss=None,
        optimizer=optimizer,
        autocast=_autocast(mixed, device, emulation),
        max_new_tokens=0,
        steps=config.steps,
        scaler=scaler,
        units=units,
        max_grad_norm=SCRIPT_MAX_GRAD_NORM if config.max_grad_norm is None else config.max_grad_norm,
    )


def _ema(denoiser: torch.nn.Module) -> Any:
    """``EMAModel(unet.parameters(), ...)`` as train_text_to_image.py makes it (``foreach`` off, its default): a clone of
    every trained weight, in the trained weights' fp32, on the device (``ema_unet.to(accelerator.device)``)."""
    from diffusers.training_utils import EMAModel

    return EMAModel(denoiser.parameters(), foreach=False)


def _noise_scheduler(spec: PipelineSpec, recipe: Recipe) -> Any:
    """The scheduler that noises the latents: the script's class on the pipeline's scheduler config, else the pipeline's."""
    if recipe.noise_scheduler is None:
        return _scheduler(spec)
    import diffusers

    cls = getattr(diffusers, recipe.noise_scheduler)
    return cls.from_config(cls.load_config(spec.component("scheduler")))


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


def _batch(
    spec: PipelineSpec, config: SimulationConfig, device: str, denoiser: torch.nn.Module, weight_dtype: torch.dtype
) -> dict[str, Any]:
    """The pixel batch in fp32 as the scripts' collate makes it (or its cached latent distribution, in the VAE's dtype),
    and the prompt's token ids padded to the tokenizers' lengths (or its cached embeddings)."""
    from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

    scale = _vae_scale(spec)
    height, width = _resolution(spec, config, denoiser)
    n = config.batch_size
    t5_tokens = _t5_tokens(spec, config, denoiser)
    batch: dict[str, Any] = {}
    with torch.device(device):
        if config.cache_latents:  # the script's latents_cache: vae.encode(pixel_values).latent_dist, kept on the device
            channels = 2 * _vae_config(spec)["latent_channels"]
            vae_dtype = torch.float32 if RECIPES[spec.class_name].vae_fp32 else weight_dtype
            parameters = torch.randn(n, channels, height // scale, width // scale, dtype=vae_dtype)
            dist = DiagonalGaussianDistribution(parameters)
            batch["latent_dist"] = dist  # its tensors too, at the top level, where the program's inputs are marked
            batch |= {f"latent_dist.{name}": value for name, value in vars(dist).items() if isinstance(value, torch.Tensor)}
        else:
            batch["pixel_values"] = torch.randn(n, 3, height, width)
        if config.cache_text_embeddings:
            batch.update(_cached_embeddings(spec, weight_dtype, t5_tokens))
        else:
            batch["input_ids"] = torch.zeros(n, spec.max_tokens("tokenizer"), dtype=torch.long)
            if t5_tokens:
                batch["t5_input_ids"] = torch.zeros(n, t5_tokens, dtype=torch.long)
    return batch


def _t5_tokens(spec: PipelineSpec, config: SimulationConfig, denoiser: torch.nn.Module) -> int:
    """T5's prompt tokens: FLUX's pipeline default (512, schnell's 256), the SD3 scripts' 77, as given; 0 without T5."""
    if spec.class_name in flux.FLUX_PIPELINES:
        return flux.max_sequence_length(denoiser, config.max_sequence_length)
    script_default = RECIPES[spec.class_name].max_sequence_length
    if script_default is None:
        if config.max_sequence_length is not None:
            raise ConfigError(f"max_sequence_length pads a T5 prompt; {spec.class_name} has no T5 text encoder")
        return 0
    return config.max_sequence_length or script_default


def _resolution(spec: PipelineSpec, config: SimulationConfig, denoiser: torch.nn.Module) -> tuple[int, int]:
    """``--resolution``: as given, else the denoiser's default sample size times the VAE's scale (1024 for SDXL and FLUX)."""
    denoiser_config: Any = denoiser.config
    sample = flux.DEFAULT_SAMPLE_SIZE if spec.class_name in flux.FLUX_PIPELINES else denoiser_config.sample_size
    scale = _vae_scale(spec)
    return config.height or sample * scale, config.width or sample * scale


def _cached_embeddings(spec: PipelineSpec, dtype: torch.dtype, t5_tokens: int) -> dict[str, torch.Tensor]:
    """The prompt's embeddings as the scripts precompute them once (for one prompt), each named ``cached_<key>``."""
    tokens = spec.max_tokens("tokenizer")
    encoders = [
        load_config(spec.component(name)) for name in ("text_encoder", "text_encoder_2", "text_encoder_3") if spec.has(name)
    ]
    if len(encoders) == 3:  # SD3: both CLIPs' states padded to T5's width, then T5's tokens; both projections
        clip_l, clip_g, t5 = encoders
        pooled = clip_l.projection_dim + clip_g.projection_dim
        return {
            "cached_encoder_hidden_states": torch.zeros(1, tokens + t5_tokens, t5.d_model, dtype=dtype),
            "cached_pooled_projections": torch.zeros(1, pooled, dtype=dtype),
        }
    if t5_tokens:
        clip, t5 = encoders
        return {
            "cached_encoder_hidden_states": torch.zeros(1, t5_tokens, t5.d_model, dtype=dtype),
            "cached_pooled_projections": torch.zeros(1, clip.hidden_size, dtype=dtype),
            "cached_txt_ids": torch.zeros(t5_tokens, 3, dtype=dtype),
        }
    if len(encoders) == 1:
        return {"cached_encoder_hidden_states": torch.zeros(1, tokens, encoders[0].hidden_size, dtype=dtype)}
    hidden = sum(encoder.hidden_size for encoder in encoders)
    return {
        "cached_encoder_hidden_states": torch.zeros(1, tokens, hidden, dtype=dtype),
        "cached_text_embeds": torch.zeros(1, encoders[-1].projection_dim, dtype=dtype),
    }


def _autocast(dtype: torch.dtype | None, device: str, emulation: KernelEmulation | None) -> Callable[[], Any]:
    """accelerate's autocast around the prepared denoiser's forward; the frozen components run outside it."""
    if dtype is None:
        return contextlib.nullcontext
    if emulation is not None:
        return lambda: emulation.autocast(dtype)
    return lambda: torch.autocast(device, dtype=dtype)


# -- the report ----------------------------------------------------------------------------------------------------

TRAINING_PHASES = {
    "text_encoder": "encode_prompt",
    "text_encoder_2": "encode_prompt",
    "text_encoder_3": "encode_prompt",
    "vae": "encode_latents",
    "unet": "train",
    "transformer": "train",
}
"""The phase of the training step each component runs in (``--json``'s ``components``)."""


def is_training(program: Program) -> bool:
    return isinstance(program.step, _TrainStep)


def training_phases(program: Program) -> dict[str, str]:
    return {name: TRAINING_PHASES[name] for name in program.modules} if is_training(program) else {}


def training_options(program: Program) -> dict[str, Any]:
    """The pixel batch's size, for the report's ``options``; empty for any other program."""
    if not is_training(program):
        return {}
    assert isinstance(program.step, _TrainStep)
    height, width = program.step.resolution
    return {"height": height, "width": width}


def training_notes(program: Program) -> list[Assumption]:
    """What the pipeline's training step assumes, for the report."""
    step = program.step
    assert isinstance(step, _TrainStep), "a pipeline training program runs _TrainStep"
    weight = str(step.weight_dtype).removeprefix("torch.")
    denoiser: Any = program.modules[step.spec.denoiser]
    trained = "LoRA adapters on the frozen denoiser" if step.lora else f"the whole {type(denoiser).__name__} in fp32"
    notes = [
        Assumption(
            name="pipeline_training",
            detail=f"one training step of {step.spec.class_name}'s denoiser as diffusers' "
            f"{step.recipe.script} runs it: {trained}; frozen components in {weight} (weight_dtype)"
            + (", the VAE in fp32" if step.recipe.vae_fp32 and "latents" not in step.cached else ""),
        ),
    ]
    notes.append(
        Assumption(
            name="step_locals_released",
            detail="the latents, noise, noisy input and prediction are "
            "released once the loss is computed (the scripts' loop holds them until the next "
            "iteration rebinds them: a few latent-sized tensors)",
        )
    )
    notes.append(
        Assumption(
            name="gradient_clipping",
            detail=f"the trained gradients clipped to norm {program.max_grad_norm:g} "
            "each step (the scripts' --max_grad_norm, SCRIPT_MAX_GRAD_NORM unless max_grad_norm is given)",
        )
    )
    if step.lora:
        targets = sorted(denoiser.peft_config["default"].target_modules)
        notes.append(
            Assumption(
                name="lora_targets",
                detail=f"adapters on {', '.join(targets)} (the scripts' default "
                "target_modules unless --lora-targets names others; peft's all-linear is read as that default), "
                "init_lora_weights='gaussian'",
            )
        )
    if step.ema is not None:
        notes.append(
            Assumption(
                name="ema",
                detail="diffusers' EMAModel over the trained weights (--use_ema, foreach off as "
                "train_text_to_image.py defaults it): an fp32 copy on the device, counted with the "
                "optimizer states, updated after each optimizer step; --offload_ema and --foreach_ema "
                "are not modelled",
            )
        )
    if "latents" in step.cached:
        notes.append(
            Assumption(
                name="cache_latents",
                detail="--cache_latents: the VAE is not on the device; this batch's "
                "latent distribution is (the script caches every batch's: the dataset's images times it)",
            )
        )
    if "text_embeddings" in step.cached:
        notes.append(
            Assumption(
                name="cache_text_embeddings",
                detail="the prompt's embeddings are precomputed once and the "
                "text encoders deleted, as the DreamBooth scripts do for one instance prompt",
            )
        )
    return notes
