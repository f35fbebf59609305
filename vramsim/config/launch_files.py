"""The setups users already keep in files: a DeepSpeed ``ds_config.json``, accelerate's ``default_config.yaml``,
and in Python transformers' ``TrainingArguments``.

Each becomes the ``SimulationConfig`` options it stands for (``LaunchOptions``); the config
fills in the options the caller left at their defaults and refuses ones the file contradicts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.sharding import NvmeSwap, ZeroSettings

__all__ = ["LaunchOptions", "read_accelerate_config", "read_deepspeed_config", "read_training_arguments"]

_ZERO_SIZES = {
    "reduce_bucket_size": "reduce_bucket",
    "stage3_prefetch_bucket_size": "prefetch_bucket",
    "stage3_max_live_parameters": "max_live_parameters",
    "stage3_param_persistence_threshold": "param_persistence_threshold",
}
"""ds_config keys (zero_optimization) that size what a rank holds, and their ``ZeroSettings`` fields;
``allgather_bucket_size`` is read too but sizes nothing (stages 1-2 all-gather in place)."""

_FSDP_STRATEGIES = {
    "FULL_SHARD": "full",
    "SHARD_GRAD_OP": "grad-op",
    "HYBRID_SHARD": "hybrid",
    "NO_SHARD": "no",
    "1": "full",
    "2": "grad-op",
    "3": "no",
    "4": "hybrid",
}
"""accelerate's ``fsdp_sharding_strategy`` (names, or torch's ShardingStrategy numbers) as ``--fsdp`` choices."""


@dataclass(frozen=True, slots=True)
class LaunchOptions:
    """What one launch file sets: ``SimulationConfig`` options, and DeepSpeed's sizes when it names them."""

    source: str
    """The file, as the messages name it."""
    options: dict[str, Any] = field(default_factory=dict)
    zero_settings: ZeroSettings | None = None


def read_deepspeed_config(path: str | Path) -> LaunchOptions:
    """A DeepSpeed config: zero_optimization (stage, offload devices, bucket sizes), bf16/fp16, the micro-batch."""
    return _deepspeed_options(_json_file(path), Path(path).name)


def _deepspeed_options(config: dict[str, Any], source: str) -> LaunchOptions:
    zero = config.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        raise ConfigError(f"DeepSpeed config {source}: zero_optimization must be an object")
    options: dict[str, Any] = {"zero": _integer(zero.get("stage", 0), "zero_optimization.stage", source)}
    offload = _offload(zero, source)
    if offload != "none":
        options["offload_states"] = offload
    for key, precision in (("bf16", "bf16"), ("fp16", "fp16")):
        enabled = (config.get(key) or {}).get("enabled", False)
        if enabled is True:  # DeepSpeed casts the weights (engine.py _configure_distributed_model); "auto": the trainer's
            options["dtype"] = precision
    micro = config.get("train_micro_batch_size_per_gpu")
    if micro is not None and micro != "auto":
        options["batch_size"] = _integer(micro, "train_micro_batch_size_per_gpu", source)
    sizes = {
        field_: _integer(zero[key], f"zero_optimization.{key}", source) for key, field_ in _ZERO_SIZES.items() if key in zero
    }
    if "allgather_bucket_size" in zero:
        _integer(zero["allgather_bucket_size"], "zero_optimization.allgather_bucket_size", source)
    nvme = _nvme(config, zero, options["zero"], source)
    settings = ZeroSettings(**sizes, nvme=nvme) if sizes or nvme else None
    return LaunchOptions(source=source, options=options, zero_settings=settings)


def _nvme(config: dict[str, Any], zero: dict[str, Any], stage: int, source: str) -> NvmeSwap | None:
    """ZeRO-Infinity's NVMe offload and its swap settings (``offload_*.buffer_count``, ``buffer_size``, ``max_in_cpu``,
    ``sub_group_size``, ``aio``), as ``estimators/sharding/nvme.py`` models them; None without NVMe."""
    on = {key: str((zero.get(key) or {}).get("device", "none")).lower() == "nvme" for key in _OFFLOADED}
    if not any(on.values()):
        return None
    if stage != 3:
        raise UnsupportedError(
            f"DeepSpeed config {source}: NVMe offload swaps ZeRO-3's partitions (stage3.py); zero_optimization.stage is {stage}"
        )
    aio = config.get("aio") or {}
    if aio.get("use_gds") is True:
        raise UnsupportedError(f"DeepSpeed config {source}: aio.use_gds (GPUDirect Storage) is not modelled yet")
    optimizer, param = zero.get("offload_optimizer") or {}, zero.get("offload_param") or {}
    given = {
        "optimizer_buffer_count": optimizer.get("buffer_count"),
        "param_buffer_count": param.get("buffer_count"),
        "param_buffer_size": param.get("buffer_size"),
        "max_in_cpu": param.get("max_in_cpu"),
        "sub_group_size": zero.get("sub_group_size"),
        "intra_op_parallelism": aio.get("intra_op_parallelism"),
        "block_size": aio.get("block_size"),
    }
    sizes = {name: _integer(value, name, source) for name, value in given.items() if value is not None}
    return NvmeSwap(optimizer=on["offload_optimizer"], params=on["offload_param"], **sizes)


_OFFLOADED = ("offload_optimizer", "offload_param")


def _offload(zero: dict[str, Any], source: str) -> str:
    """``offload_optimizer`` / ``offload_param`` devices as ``--offload-states``."""
    devices = {}
    for key in _OFFLOADED:
        device = str((zero.get(key) or {}).get("device", "none")).lower()
        if device not in ("none", "cpu", "nvme"):
            raise ConfigError(
                f"DeepSpeed config {source}: unknown zero_optimization.{key}.device {device!r}; choose one of: none, cpu, nvme"
            )
        devices[key] = device in ("cpu", "nvme")  # NVMe: the device holds what it holds with cpu (_nvme)
    if devices["offload_param"] and not devices["offload_optimizer"]:
        raise UnsupportedError(
            f"DeepSpeed config {source}: offload_param without offload_optimizer is not modelled yet; offload both"
        )
    return "params" if devices["offload_param"] else "optimizer" if devices["offload_optimizer"] else "none"


def read_accelerate_config(path: str | Path) -> LaunchOptions:
    """accelerate's config file, parsed by accelerate's own ``load_config_from_file``: distributed type, processes,
    mixed precision, and its FSDP or DeepSpeed section (a ``deepspeed_config_file`` is read as a ds_config)."""
    import yaml  # type: ignore[import-untyped]
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file  # type: ignore[import-untyped]

    source = Path(path).name
    try:
        config = load_config_from_file(str(path))
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as exc:  # accelerate's for a bad file
        message = " ".join(str(exc).split())
        raise ConfigError(f"cannot read the accelerate config {path}: {message}") from None
    if not isinstance(config, ClusterConfig):
        raise UnsupportedError(f"accelerate config {source}: only local-machine clusters are modelled (not SageMaker)")
    kind = str(getattr(config.distributed_type, "value", config.distributed_type)).upper()
    options: dict[str, Any] = {}
    if config.num_processes and config.num_processes > 0:
        options["gpus"] = int(config.num_processes)
    precision = str(config.mixed_precision or "no").lower()  # YAML reads an unquoted ``no`` as False
    if precision not in ("no", "bf16", "fp16"):
        raise UnsupportedError(f"accelerate config {source}: mixed_precision {precision!r} is not modelled; use bf16 or fp16")
    if kind == "DEEPSPEED":
        return _accelerate_deepspeed(config.deepspeed_config or {}, Path(path).parent, source, options, precision)
    if precision != "no":  # accelerate runs the forward under torch.autocast
        options["mixed_precision"] = precision
    if kind == "FSDP":
        options.update(_accelerate_fsdp(config.fsdp_config or {}, source))
    elif kind not in ("NO", "MULTI_GPU"):
        raise UnsupportedError(
            f"accelerate config {source}: distributed_type {kind} is not modelled; choose NO, MULTI_GPU, FSDP or DEEPSPEED"
        )
    return LaunchOptions(source=source, options=options)


def _accelerate_fsdp(fsdp: dict[str, Any], source: str) -> dict[str, Any]:
    """``fsdp_config``: FSDP2 ``fsdp_reshard_after_forward`` or FSDP1 ``fsdp_sharding_strategy``, ``fsdp_offload_params``."""
    if str(fsdp.get("fsdp_version", 1)) == "2" and isinstance(fsdp.get("fsdp_reshard_after_forward"), bool):
        mode = "full" if fsdp["fsdp_reshard_after_forward"] else "grad-op"
    else:
        strategy = str(fsdp.get("fsdp_sharding_strategy", fsdp.get("fsdp_reshard_after_forward", "FULL_SHARD"))).upper()
        if strategy not in _FSDP_STRATEGIES:
            raise UnsupportedError(
                f"accelerate config {source}: fsdp_sharding_strategy {strategy} is not modelled; "
                f"choose one of: {', '.join(k for k in _FSDP_STRATEGIES if not k.isdigit())}"
            )
        mode = _FSDP_STRATEGIES[strategy]
    options: dict[str, Any] = {"fsdp": mode}
    if fsdp.get("fsdp_offload_params") in (True, "true", "True"):
        options["offload_states"] = "params"
    return options


def _accelerate_deepspeed(
    section: dict[str, Any], folder: Path, source: str, options: dict[str, Any], precision: str
) -> LaunchOptions:
    """``deepspeed_config``: a ``deepspeed_config_file``, or its zero_stage and offload devices."""
    if section.get("deepspeed_config_file"):
        read = read_deepspeed_config(folder / str(section["deepspeed_config_file"]))
        return LaunchOptions(source=source, options={**options, **read.options}, zero_settings=read.zero_settings)
    zero = {
        "stage": section.get("zero_stage", 0),
        "offload_optimizer": {"device": section.get("offload_optimizer_device", "none")},
        "offload_param": {"device": section.get("offload_param_device", "none")},
    }
    precision_section = {precision: {"enabled": True}} if precision != "no" else {}
    read = _deepspeed_options({"zero_optimization": zero, **precision_section}, source)
    return LaunchOptions(source=source, options={**options, **read.options}, zero_settings=read.zero_settings)


def read_training_arguments(args: Any) -> LaunchOptions:
    """transformers' ``TrainingArguments`` as the Trainer runs them: the micro-batch, gradient accumulation,
    clipping (``max_grad_norm``, on by default), ``optim``, gradient checkpointing, ``torch_empty_cache_steps``,
    ``torch_compile``; ``bf16``/``fp16`` as accelerate's autocast, or with ``deepspeed`` as its config's bf16/fp16
    mode; ``fsdp`` through the plugin arguments transformers derives (``fsdp_plugin_args``). The GPU count is not
    among them (it is the launcher's): give ``gpus``."""
    from transformers import TrainingArguments

    if not isinstance(args, TrainingArguments):
        raise ConfigError(f"training_args must be a transformers.TrainingArguments, not {type(args).__name__}")
    source = "TrainingArguments"
    options: dict[str, Any] = {
        "batch_size": int(args.per_device_train_batch_size),
        "grad_accum": int(args.gradient_accumulation_steps),
        "optimizer": str(getattr(args.optim, "value", args.optim)),
    }
    if args.max_grad_norm:  # the Trainer clips only when it is set and above 0
        options["max_grad_norm"] = float(args.max_grad_norm)
    if args.gradient_checkpointing:
        options["checkpointing"] = "full"
    if args.torch_empty_cache_steps:
        options["torch_empty_cache_steps"] = int(args.torch_empty_cache_steps)
    if args.torch_compile:
        options["compile"] = True
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else None
    zero_settings = None
    if args.deepspeed:  # the config as TrainingArguments filled its "auto" values (trainer_config_process)
        read = _deepspeed_options(args.hf_deepspeed_config.config, source)
        options.update(read.options)
        zero_settings = read.zero_settings
    elif precision is not None:
        options["mixed_precision"] = precision
    plugin = getattr(args, "fsdp_plugin_args", None)
    if plugin:
        fsdp = {"fsdp_version": plugin.get("fsdp_version", 2), "fsdp_offload_params": plugin.get("cpu_offload", False)}
        key = "fsdp_reshard_after_forward" if isinstance(plugin.get("reshard_after_forward"), bool) else "fsdp_sharding_strategy"
        fsdp[key] = plugin.get("reshard_after_forward", True)
        options.update(_accelerate_fsdp(fsdp, source))
        if plugin.get("activation_checkpointing"):
            options["checkpointing"] = "full"
    return LaunchOptions(source=source, options=options, zero_settings=zero_settings)


def _json_file(path: str | Path) -> dict[str, Any]:
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the DeepSpeed config {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"DeepSpeed config {Path(path).name}: expected a JSON object at the top")
    return config


def _integer(value: Any, key: str, source: str) -> int:
    """DeepSpeed takes sizes as numbers (5e8 too); "auto" is filled in by transformers' integration from the model."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise ConfigError(
            f"DeepSpeed config {source}: {key} must be a non-negative whole number, got {value!r}"
            + (" ('auto' is filled in by transformers' Trainer; give the number)" if value == "auto" else "")
        )
    return int(value)
