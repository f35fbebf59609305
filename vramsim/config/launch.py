"""The launch files a job already has (TrainingArguments, a DeepSpeed config, accelerate's config), which fill in
the other options."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from vramsim.config.launch_files import LaunchOptions, read_accelerate_config, read_deepspeed_config, read_training_arguments
from vramsim.config.options import as_is, option
from vramsim.errors import ConfigError
from vramsim.estimators.sharding import ZeroSettings

__all__ = ["LaunchFileOptions"]


@dataclass(kw_only=True)
class LaunchFileOptions:
    """The files given, and DeepSpeed's zero_optimization sizes, read from one or given in Python."""

    training_args: Any = field(
        default=None,
        repr=False,
        metadata=option(
            help="transformers' TrainingArguments: per-device batch, gradient accumulation, clipping, optim, bf16/fp16, "
            "gradient checkpointing, torch_empty_cache_steps, torch_compile, its deepspeed config and fsdp settings set the "
            "matching options (vramsim/config/launch_files.py); give gpus, which is the launcher's",
            cli=False,
        ),
    )
    deepspeed: str | None = field(
        default=None,
        metadata=option(
            help="a DeepSpeed ds_config.json: zero_optimization (stage, offload_optimizer/offload_param devices, bucket "
            "sizes), bf16/fp16 and train_micro_batch_size_per_gpu set the matching options (vramsim/config/launch_files.py)",
            report=as_is,
        ),
    )
    accelerate_config: str | None = field(
        default=None,
        metadata=option(
            help="accelerate's config file (default_config.yaml): distributed_type, num_processes, mixed_precision and its "
            "fsdp_config / deepspeed_config set the matching options",
            report=as_is,
        ),
    )
    zero_settings: ZeroSettings | None = field(
        default=None,
        repr=False,
        metadata=option(
            help="DeepSpeed's zero_optimization sizes (reduce and prefetch buckets, live and persistent parameters); none "
            "given: DeepSpeed's defaults, or the --deepspeed file's",
            cli=False,
        ),
    )

    def apply_launch_files(self) -> None:
        """Each file given sets the options it stands for (vramsim/config/launch_files.py), before any is checked."""
        if self.training_args is not None:
            self._apply_launch_file(read_training_arguments(self.training_args))
        if self.deepspeed is not None:
            self._apply_launch_file(read_deepspeed_config(self.deepspeed))
        if self.accelerate_config is not None:
            self._apply_launch_file(read_accelerate_config(self.accelerate_config))

    def _apply_launch_file(self, launch: LaunchOptions) -> None:
        """The file's options fill in those left at their defaults; one set otherwise must agree with the file."""
        defaults = {f.name: f.default for f in fields(self)}
        for name, value in launch.options.items():
            current = getattr(self, name)
            if current == defaults[name]:
                setattr(self, name, value)
            elif str(current).lower() != str(value).lower():
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} {current} contradicts {launch.source}, which sets {name} = {value}")
        if launch.zero_settings is not None:
            if self.zero_settings not in (None, launch.zero_settings):
                raise ConfigError(f"zero_settings contradicts {launch.source}'s zero_optimization sizes")
            self.zero_settings = launch.zero_settings
