"""Turn a model source and a config into a runnable ``Program`` on one device."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from torch.utils._pytree import tree_map_only
from transformers import PretrainedConfig

from vramsim.config import DiffusionOptions, SimulationConfig
from vramsim.config.choices import parse_loss
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import MXFP4_CHECKPOINT_DTYPE
from vramsim.estimators.checkpointing_plan import CheckpointPlan, parse_checkpointing
from vramsim.tracer.data_dependent import seed
from vramsim.tracer.kernels.emulation import KernelEmulation
from vramsim.workload.checkpointing import UnitMarker, apply_checkpointing, install_unit_marker, saved_tensor_context
from vramsim.workload.compiled import compile_model
from vramsim.workload.float8 import convert_to_float8
from vramsim.workload.inputs import default_inputs
from vramsim.workload.losses import install_loss, liger_run
from vramsim.workload.models import (
    ModelSource,
    build_model,
    call_user,
    load_builder,
    load_config,
    loads_checkpoint_dtype,
    pipeline_index,
)
from vramsim.workload.optimizer_in_backward import OptimizerInBackward
from vramsim.workload.optimizers import make_optimizer, optimizer_over
from vramsim.workload.packing import packed_inputs
from vramsim.workload.parallel.expert import rank_config as expert_rank_config
from vramsim.workload.parallel.tensor import rank_config
from vramsim.workload.positions import check_positions
from vramsim.workload.program import STEPS, Program
from vramsim.workload.quantization.training import QUANTIZED_TRAINING_LAYERS, lora_dispatch
from vramsim.workload.quantization.weights import check_quantized_target, is_bitsandbytes, quantization_config, quantize_model
from vramsim.workload.quiet import quiet_peft
from vramsim.workload.targets import resolve_target
from vramsim.workload.text_only import route_text_only

__all__ = ["MXFP4_WEIGHTS", "build_program", "check_can_generate", "weight_dtype"]

MXFP4_WEIGHTS = "an MXFP4 checkpoint's other tensors"
"""Where the weights' dtype comes from for an MXFP4 checkpoint whose config names none (``MXFP4_CHECKPOINT_DTYPE``)."""


def weight_dtype(config: SimulationConfig, model_config: Any) -> torch.dtype:
    """The weights' dtype (``_weights_source`` says where it comes from)."""
    return _weights_source(config, model_config)[0]


def _weights_source(config: SimulationConfig, model_config: Any) -> tuple[torch.dtype, str]:
    """The weights' dtype and where it comes from: ``given``; else ``the checkpoint's config`` (its ``dtype``; for an
    MXFP4 checkpoint naming none, the dtype it stores its other tensors in, ``MXFP4_CHECKPOINT_DTYPE``), which inference
    loads and training too where transformers' ``from_pretrained`` loads it when a script passes no dtype
    (``loads_checkpoint_dtype``); else ``default``, float32."""
    assert not isinstance(config.dtype, str), "SimulationConfig resolves dtype names"
    if config.dtype is not None:
        return config.dtype, "given"
    stored, source = _stored_dtype(model_config), "the checkpoint's config"
    if stored is None and _checkpoint_quantization(model_config) == "mxfp4":
        stored, source = getattr(torch, MXFP4_CHECKPOINT_DTYPE), MXFP4_WEIGHTS
    if isinstance(stored, torch.dtype) and stored.is_floating_point and (config.task != "train" or loads_checkpoint_dtype()):
        return stored, source
    return torch.float32, "default"


def _stored_dtype(model_config: Any) -> Any:
    """The config's ``dtype`` (transformers 5's name; ``torch_dtype`` is its deprecated alias). A composite config
    such as Llama 4's may keep it only under ``text_config``: ``from_pretrained(dtype="auto")`` then reads the
    dtype off the checkpoint's weights, which are not here, so the text config's (stored from the same checkpoint)
    stands in for them."""
    stored = getattr(model_config, "dtype", None)
    if stored is None and hasattr(model_config, "get_text_config"):
        stored = getattr(model_config.get_text_config(), "dtype", None)
    return stored


def _checkpoint_quantization(model_config: Any) -> str | None:
    """The ``quant_method`` of the checkpoint's own ``quantization_config`` (gpt-oss's ``mxfp4``), if it has one."""
    own = getattr(model_config, "quantization_config", None)
    return own.get("quant_method") if isinstance(own, dict) else None


PIPELINE_OPTIONS = tuple(f.name for f in dataclasses.fields(DiffusionOptions))
"""``SimulationConfig`` options a diffusion pipeline reads and no single model does."""


def _refuse_pipeline_options(config: SimulationConfig) -> None:
    """A pipeline's option given for a single model would change nothing: one line instead of a silent no-op."""
    defaults = {f.name: f.default for f in dataclasses.fields(SimulationConfig)}
    given = [name for name in PIPELINE_OPTIONS if getattr(config, name) != defaults[name]]
    if given:
        raise ConfigError(
            f"{given[0]} is an option of diffusion pipelines, and this model is not one; give a pipeline id "
            "or folder, or leave it out"
        )


def build_program(
    source: ModelSource,
    config: SimulationConfig,
    *,
    device: str,
    emulation: KernelEmulation | None = None,
    foreach: bool = False,
    checkpointing: Literal["marked", "applied"] = "applied",
) -> Program:
    """Build model, batch and optimizer on ``device``.

    On meta, ``emulation`` supplies the target's autocast and re-enters itself for checkpoint
    recompute; on a real device, torch's own autocast is used. ``checkpointing="applied"`` runs
    the config's checkpointing for real; ``"marked"`` runs without it and marks the blocks it
    would wrap, for the graph to compute every choice from one trace.
    """
    pipeline = pipeline_index(source)
    if pipeline is not None:  # diffusers' knowledge is loaded for a pipeline only
        from vramsim.workload.diffusion.build import build_diffusion_program

        return build_diffusion_program(
            pipeline, config, device=device, emulation=emulation, foreach=foreach, checkpointing=checkpointing
        )
    _refuse_pipeline_options(config)
    source, dtype, weights = _weights_dtype(_rank_source(source, config), config)
    model = _built_model(source, config, device, dtype)
    warnings = _position_warnings(model, config)
    seq_len = config.seq_len // config.cp  # a context-parallel rank's tokens
    train = config.task == "train"
    model.train(train)
    plan = parse_checkpointing(config.checkpointing)
    units = _checkpoint(model, config, plan, emulation, checkpointing)
    model = _finish_model(model, config, device)
    if units is not None:
        units.name_within(model)
    batch = _batch(model, config, device, seq_len)
    route_text_only(model, batch)
    compiled = compile_model(model, device=device) if config.compile else None
    optimizer = _optimizer(model, config, foreach) if train else None
    mixed = config.mixed_precision
    assert not isinstance(mixed, str), "SimulationConfig resolves dtype names"
    scaler = _grad_scaler(model, device) if optimizer is not None and mixed == torch.float16 else None
    return Program(
        modules={"": model},
        step=STEPS[config.task],
        batch=batch,
        loss=config.loss if callable(config.loss) else None,
        optimizer=optimizer,
        autocast=_autocast(mixed, device, emulation),
        max_new_tokens=config.max_new_tokens or 0,
        steps=config.steps,
        scaler=scaler,
        saved_tensors=saved_tensor_context(plan) if checkpointing == "applied" else contextlib.nullcontext,
        units=units,
        warnings=warnings,
        weights_from=weights,
        static_cache=_static_cache(config, batch),
        grad_accum=config.grad_accum,
        max_grad_norm=config.max_grad_norm,
        keep_outputs=config.keep_outputs,
        compiled=compiled,
    )


def _optimizer(model: torch.nn.Module, config: SimulationConfig, foreach: bool) -> torch.optim.Optimizer | None:
    """The step's optimizer, or one per parameter stepped inside backward (``optimizer_in_backward``)."""
    if not config.optimizer_in_backward:
        return make_optimizer(model, config.optimizer, foreach=foreach)
    return OptimizerInBackward(model, lambda params: optimizer_over(params, config.optimizer, foreach=foreach))


def _rank_source(source: ModelSource, config: SimulationConfig) -> ModelSource:
    """The source loaded, and cut to one rank's shard under tensor or expert parallel."""
    if isinstance(source, (str, Path)):
        source = load_builder(str(source)) or load_config(source, trust_remote_code=config.trust_remote_code)
    if config.tp > 1:
        if not isinstance(source, PretrainedConfig):
            raise UnsupportedError("tp splits a transformers decoder by its config; give a model id or a config")
        source = rank_config(source, config.tp)
    if config.ep > 1:
        if not isinstance(source, PretrainedConfig):
            raise UnsupportedError("ep splits a transformers MoE decoder by its config; give a model id or a config")
        source = expert_rank_config(source, config.ep)
    return source


def _weights_dtype(source: ModelSource, config: SimulationConfig) -> tuple[ModelSource, torch.dtype | None, str]:
    """The source to build (a config copied), the weights' dtype, and where that dtype came from."""
    if isinstance(source, PretrainedConfig):
        source = copy.deepcopy(source)  # building a model writes its dtype into the config
        dtype, weights = _weights_source(config, source)
        return source, dtype, weights
    assert not isinstance(config.dtype, str), "SimulationConfig resolves dtype names"
    return source, config.dtype, "given" if config.dtype is not None else "as built"


def _built_model(source: ModelSource, config: SimulationConfig, device: str, dtype: torch.dtype | None) -> torch.nn.Module:
    """The model built on ``device``, its weights quantized or its linears made float8 when asked, checked able to
    generate when it must."""
    model = build_model(
        source,
        device=device,
        dtype=dtype,
        model_class=config.model_class,
        trust_remote_code=config.trust_remote_code,
        task=config.task,
        attn_implementation=config.attn_implementation,
    )
    if config.quantization is not None:
        quantization = quantization_config(config.quantization, _first_float_dtype(model))
        check_quantized_target(quantization, target=config.device, train=config.task == "train", lora=config.lora is not None)
        quantize_model(model, quantization, device=device, target=config.device, train=config.task == "train")
    if config.float8 is not None:  # torchtitan converts the model before checkpointing, compile and sharding
        convert_to_float8(model, config.float8)
    if config.task == "generate":
        check_can_generate(model)
    return model


def _position_warnings(model: torch.nn.Module, config: SimulationConfig) -> list[str]:
    """A warning when the sequence outruns the model's positions; the user's own inputs say their own length."""
    if config.inputs is None:
        warning = check_positions(model, seq_len=config.seq_len, new_tokens=config.max_new_tokens or 0)
        return [warning] if warning else []
    return []


def _checkpoint(
    model: torch.nn.Module,
    config: SimulationConfig,
    plan: CheckpointPlan,
    emulation: KernelEmulation | None,
    checkpointing: Literal["marked", "applied"],
) -> UnitMarker | None:
    """Checkpointing applied to ``model``, or its units marked for the graph to choose from (those returned).
    A compiled model's checkpointing is always applied: dynamo captures ``torch.utils.checkpoint`` as a
    higher-order op and AOTAutograd's partitioner recomputes its region, which no what-if of the graph sees."""
    if checkpointing == "marked" and not config.compile:
        return install_unit_marker(model) if config.task == "train" else None
    if plan.kind == "all":
        raise ConfigError("checkpointing='all' compares the choices from one trace; a real run takes one choice")
    apply_checkpointing(model, plan, emulation)
    return None


def _finish_model(model: torch.nn.Module, config: SimulationConfig, device: str) -> torch.nn.Module:
    """The named loss installed, then the LoRA adapters (a k-bit base prepared first where the recipe does)."""
    _install_named_loss(model, config, device)
    if config.lora is not None:
        train = config.task == "train"
        if config.quantization is not None and train and is_bitsandbytes(model) and config.kbit_preparation == "peft":
            _prepare_for_kbit_training(model)
        model = _apply_lora(model, config.lora, in_base_dtype=train and config.recipe_defaults.adapters_in_base_dtype)
    return model


def _batch(model: torch.nn.Module, config: SimulationConfig, device: str, seq_len: int) -> dict[str, Any]:
    """The step's inputs on ``device``: the model's defaults for a rank's tokens, or the user's own."""
    with torch.device(device):
        if config.inputs is None:
            make = packed_inputs if config.packed else default_inputs
            batch = make(model, config.batch_size, seq_len, train=config.task == "train")
            if callable(config.loss):  # the user's loss replaces the model's: no labels, so no second loss
                batch.pop("labels", None)
        else:
            batch = _user_batch(call_user(config.inputs, config.batch_size, config.seq_len), device)
    return batch


def _install_named_loss(model: torch.nn.Module, config: SimulationConfig, device: str) -> None:
    """A named loss (``liger-flce``, ``chunked-ce``) in place of the model's head and loss; Liger's reads the target."""
    named = parse_loss(config.loss) if isinstance(config.loss, str) else None
    if named is None:
        return
    liger = None
    if named.kind == "liger-flce":
        if device != "meta":
            raise UnsupportedError(
                "loss='liger-flce' is traced on meta with a stand-in for Liger's Triton kernel; a real run of it is not wired up"
            )
        assert not isinstance(config.mixed_precision, str), "SimulationConfig resolves dtype names"
        liger = liger_run(resolve_target(config.device).profile, config.mixed_precision)
    install_loss(model, named, liger)


def _user_batch(batch: Any, device: str) -> dict[str, Any]:
    """The user's ``inputs=`` result, its tensors on ``device``: on meta, one made on the CPU keeps its
    values (``seed``) for the program to read, as synthesised inputs do."""
    if not isinstance(batch, dict):
        raise ConfigError(f"inputs= returned {type(batch).__name__}; return a dict of the model's keyword arguments")
    if device != "meta":
        return batch
    return tree_map_only(torch.Tensor, lambda t: t if t.device.type == "meta" else seed(t, "meta"), batch)


def check_can_generate(model: torch.nn.Module) -> None:
    """Refuse a model transformers says cannot generate (an encoder such as BERT): it builds no cache."""
    can_generate = getattr(model, "can_generate", None)
    if callable(can_generate) and not can_generate():
        raise UnsupportedError(
            f"{type(model).__name__} cannot generate (transformers' can_generate() is False): it builds no KV cache; "
            "use --task forward, or a model class with a generation head"
        )


def _grad_scaler(model: torch.nn.Module, device: str) -> torch.amp.GradScaler:
    """The AMP recipe for fp16 autocast: fp32 master weights and a ``GradScaler`` for the
    device the step runs on (meta stands for the target; torch/amp/grad_scaler.py checks
    CUDA availability for ``"cuda"`` only). bf16 autocast needs no scaler."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    if any(p.dtype == torch.float16 for p in trainable):
        raise ConfigError(
            "fp16 autocast training scales the loss with a GradScaler, which cannot unscale fp16 gradients; "
            "keep fp32 master weights (dtype=fp32) or use mixed_precision=bf16"
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


def _apply_lora(model: torch.nn.Module, lora: Any, *, in_base_dtype: bool = False) -> torch.nn.Module:
    """peft's adapters on ``model``; ``in_base_dtype``: kept in the base's dtype (``autocast_adapter_dtype=False``),
    where peft's default upcasts bf16/fp16 adapters to float32."""
    import peft

    lora_config = lora if isinstance(lora, peft.PeftConfig) else peft.LoraConfig(**dict(lora))
    if isinstance(lora_config, peft.LoraConfig) and any(isinstance(m, QUANTIZED_TRAINING_LAYERS) for m in model.modules()):
        lora_dispatch(lora_config)
    try:
        with quiet_peft():
            return peft.get_peft_model(model, lora_config, autocast_adapter_dtype=not in_base_dtype)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"LoRA cannot be applied: {exc}") from exc


def _first_float_dtype(model: torch.nn.Module) -> torch.dtype:
    return next(p.dtype for p in model.parameters() if p.is_floating_point())


def _prepare_for_kbit_training(model: torch.nn.Module) -> None:
    """QLoRA's recipe (peft's ``prepare_model_for_kbit_training``, which TRL's trainer calls for a base
    bitsandbytes loaded, ``is_loaded_in_4bit``/``8bit``; an FP8 base trains as loaded):
    the base frozen, the weights left unquantized (embeddings, norms, head) upcast to fp32.
    Checkpointing stays the run's own choice (``checkpointing=``), not the recipe's default."""
    import peft

    peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def _static_cache(config: SimulationConfig, batch: dict[str, Any]) -> bool:
    """``cache_implementation='static'``, for a decoder prompted by token ids (what the loop positions)."""
    if config.cache_implementation != "static":
        return False
    if "decoder_input_ids" in batch or "input_ids" not in batch:
        raise UnsupportedError("cache_implementation='static' is run for decoder-only models prompted by input_ids")
    return True
