"""The options of one simulation: every concern's group in one flat ``SimulationConfig``, checked once."""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any

from vramsim.config.analysis import AnalysisOptions
from vramsim.config.diffusion import DiffusionOptions
from vramsim.config.float8 import Float8Options
from vramsim.config.launch import LaunchFileOptions
from vramsim.config.options import Option
from vramsim.config.parallelism import ParallelOptions
from vramsim.config.precision import PrecisionOptions
from vramsim.config.quantization import QuantizationOptions
from vramsim.config.recipes import RecipeOptions
from vramsim.config.surprises import device_warning, sharding_warning
from vramsim.config.training import TrainingOptions
from vramsim.config.workload import WorkloadOptions
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.sharding import ShardingPlan, sharding_plan

__all__ = ["OPTION_ORDER", "SimulationConfig", "options"]

OPTION_ORDER = (
    "task", "recipe", "batch_size", "seq_len", "packed", "device", "dtype", "mixed_precision", "optimizer", "checkpointing",
    "gradient_checkpointing", "activation_offloading", "grad_accum", "max_grad_norm", "optimizer_in_backward",
    "keep_outputs", "lora", "quantization", "kbit_preparation",
    "max_new_tokens",
    "cache_implementation", "inputs", "loss", "model_class", "attn_implementation", "torch_empty_cache_steps",
    "trust_remote_code", "compile", "float8", "expandable_segments", "cuda_module_loading", "torch_autograd", "headroom", "gpus",
    "device_map", "max_memory",
    "dp", "zero", "fsdp", "gradient_as_bucket_view", "offload_states", "shard_group_size", "training_args", "deepspeed",
    "accelerate_config", "zero_settings", "tp", "ep", "cp", "pp", "pp_schedule", "micro_batches", "pp_virtual_stages",
    "moe_routing", "height", "width", "num_inference_steps", "max_sequence_length", "guidance_scale", "num_images",
    "num_frames", "vae_tiling", "vae_slicing", "attention_slicing", "offload", "group_offload", "layerwise_casting",
    "attention_processor", "vae", "quantized_components",
    "cache_latents", "cache_text_embeddings",
    "ema", "steps",
    "memory_history",
)  # fmt: skip
"""The order the command line offers the options and the report lists them, which users know; the groups
interleave in it, so it is kept here rather than taken from the fields."""


def options() -> list[tuple[Field[Any], Option]]:
    """Every ``SimulationConfig`` field with its ``Option``, in ``OPTION_ORDER`` (a field missing from it fails here)."""
    ordered = sorted((f for f in fields(SimulationConfig) if f.init), key=lambda f: OPTION_ORDER.index(f.name))
    return [(f, f.metadata["option"]) for f in ordered]


# Bases from last to first: a dataclass lays out its bases' fields from the last one, so these read workload first.
@dataclass(kw_only=True)
class SimulationConfig(
    DiffusionOptions,
    LaunchFileOptions,
    AnalysisOptions,
    ParallelOptions,
    QuantizationOptions,
    RecipeOptions,
    Float8Options,
    TrainingOptions,
    PrecisionOptions,
    WorkloadOptions,
):
    """Everything ``simulate`` needs besides the model; ``__post_init__`` rejects bad values.

    Each field's ``Option`` (its metadata) documents it and says how the CLI and the report show it;
    each group checks its own fields, against the workload where it depends on the task.
    """

    warnings: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    """Options taken as given that are easy to misread (``vramsim/config/surprises.py``), one line each."""

    @property
    def sharding(self) -> ShardingPlan:
        """The data-parallel plan of ``gpus``, ``zero`` and ``fsdp`` (checked in ``__post_init__``); a device map
        is one model over the GPUs, no data-parallel ranks."""
        return sharding_plan(
            1 if self.device_map else self.gpus // (self.tp * self.pp),
            self.zero,
            self.fsdp,
            self.gradient_as_bucket_view,
            offload=self.offload_states,
            shard_group=self.shard_group_size,
            zero_settings=self.zero_settings,
            pipelined=self.pp > 1,
            expert_parallel=self.ep,
        )

    @classmethod
    def from_options(cls, **options: Any) -> SimulationConfig:
        """Like the constructor, but an unknown option is a ConfigError naming the choices."""
        names = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r}; choose from: {', '.join(sorted(names))}")
        return cls(**options)

    def __post_init__(self) -> None:
        """Each group checks its own options, in the order their values depend on one another."""
        self.apply_launch_files()
        self.check_workload()
        self.check_recipe(self)
        self.check_precision()
        self.check_training(self)
        self._refuse_unmodelled_compile()  # reads gpus as given, before it defaults to the model-parallel ranks
        self.check_analysis(self)
        self.check_parallelism(self, self)
        try:
            sharding = self.sharding
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.check_sharding(sharding, self)
        found = (device_warning(self.device), sharding_warning(sharding, self.gpus))
        self.warnings = tuple(warning for warning in found if warning is not None)
        self._refuse_unmodelled_training()
        self.check_quantization()
        self.check_diffusion(self)
        self.resolve_precision()
        self.check_float8(self)

    def _refuse_unmodelled_compile(self) -> None:
        """``--compile`` is modelled for one device's training step or forward (vramsim/workload/compiled.py)."""
        if not self.compile:
            return
        if self.task == "generate":
            raise UnsupportedError(
                "compile with task='generate' is not modelled: a compiled generate recompiles as its cache grows, "
                "which is not traced; compile is modelled for train and forward (vramsim/workload/compiled.py)"
            )
        if self.checkpointing != "none" or self.gradient_checkpointing:
            raise UnsupportedError(
                "compile with checkpointing is not modelled yet: dynamo traces a checkpoint's body without the "
                "target's kernel emulation (its SDPA becomes the math path; +22-25% on CPU checks); see docs/compile.md"
            )
        if self.checkpointing in ("all", "auto", "offload"):
            raise UnsupportedError(
                f"compile with checkpointing='{self.checkpointing}' is not modelled: a compiled trace runs one "
                "checkpointing choice for real (none, full, every:K, selective...), and offload's saved-tensor hooks "
                "are not traced by dynamo"
            )
        others = {
            "gpus without fsdp": self.gpus > 1 and self.fsdp == "no",
            "tp": self.tp > 1,
            "pp": self.pp > 1,
            "quantization": self.quantization is not None,
        }
        named = [name for name, on in others.items() if on]
        if named:
            raise UnsupportedError(
                f"compile with {', '.join(named)} is not modelled yet; see docs/compile.md for what compile models"
            )

    def _refuse_unmodelled_training(self) -> None:
        """Accumulation is modelled with DDP, FSDP2 and ZeRO 1-3 (``estimators/sharding/micro_steps.py``), not with
        the model- and pipeline-parallel what-ifs or host offload; a named loss replaces the loss on one rank's
        whole model."""
        others = {
            "pp": self.pp > 1,
            "tp": self.tp > 1,
            "cp": self.cp > 1,
            "ep": self.ep > 1,
            "offload_states": self.offload_states != "none",
        }
        named = [name for name, on in others.items() if on]
        if self.packed and self.inputs is not None:
            raise ConfigError("packed builds the batch vramsim synthesises; with inputs=, pack them yourself")
        parallel = [name for name in named if name in ("pp", "tp", "cp", "ep")]
        if self.packed and parallel:
            raise UnsupportedError(f"packed with {parallel[0]} is not modelled yet")
        if self.grad_accum > 1 and named:
            raise UnsupportedError(
                f"grad_accum with {', '.join(named)} is not modelled yet; it is with DDP, FSDP and ZeRO 1-3 "
                "(pipeline micro-batches are --micro-batches)"
            )
        if self.optimizer_in_backward:
            mixed = str(self.mixed_precision).removeprefix("torch.")
            others = {
                "gpus": self.gpus > 1 or bool(self.zero) or self.fsdp != "no",
                "tp or pp": self.tp > 1 or self.pp > 1,
                "compile": self.compile,
                "fp16 autocast (its GradScaler steps after backward)": mixed in ("fp16", "float16"),
            }
            named = [name for name, on in others.items() if on]
            if named:
                raise UnsupportedError(f"optimizer_in_backward with {named[0]} is not modelled yet")
        if isinstance(self.loss, str) and (self.tp > 1 or self.pp > 1):
            raise UnsupportedError(f"loss={self.loss!r} with tp or pp is not modelled yet")
