"""The options of one simulation, checked once."""

from __future__ import annotations

from argparse import ArgumentTypeError
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from vramsim.config.choices import OPTIMIZERS, QUANTIZATIONS, canonical_optimizer, parse_loss
from vramsim.config.launch_files import LaunchOptions, read_accelerate_config, read_deepspeed_config, read_training_arguments
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import ModuleLoading
from vramsim.estimators.checkpointing import parse_checkpointing
from vramsim.estimators.pipeline import PipelinePlan, pipeline_plan
from vramsim.estimators.sharding import MAX_GPUS, ShardingPlan, sharding_plan
from vramsim.estimators.sharding_plan import ZeroSettings

__all__ = ["Option", "SimulationConfig", "options"]

Task = Literal["train", "forward", "generate"]
TASKS = ("train", "forward", "generate")
TorchAutograd = Literal["installed", "1.10"]
if TYPE_CHECKING:
    import torch

_DTYPE_NAMES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
_MIXED_NAMES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}
"""The dtype names taken, as torch's attribute names: the command line parses its arguments without torch."""
MAX_SEQ_LEN = 1 << 22
"""Longer sequences than 4M tokens are rejected: no model is trained at that length today."""
MAX_BATCH = 1 << 20
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
"""transformers' ``attn_implementation`` names (``ALL_ATTENTION_FUNCTIONS`` plus ``eager``)."""


def lora_of_rank(
    rank: int, targets: str = "all-linear", *, alpha: float | None = None, dropout: float = 0.0, dora: bool = False
) -> dict[str, Any]:
    """peft ``LoraConfig`` arguments for a LoRA of rank ``rank``: alpha 2r unless given, on every linear
    layer but the output head (peft's own ``"all-linear"``) unless ``targets`` names modules
    (comma-separated), DoRA with ``dora`` (``use_dora=True``); ``lora=16`` and ``--lora-rank 16`` both mean
    the defaults."""
    config: dict[str, Any] = {
        "r": rank,
        "lora_alpha": 2 * rank if alpha is None else alpha,
        "target_modules": targets if targets == "all-linear" else targets.split(","),
    }
    if dropout:
        config["lora_dropout"] = dropout
    if dora:
        config["use_dora"] = True
    return config


COMMANDS = ("trace", "validate")
"""The CLI commands that run a workload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """How one ``SimulationConfig`` field is offered outside Python: the CLI flag and the report.

    The CLI's arguments and the report's JSON ``options`` are derived from these, so a new
    field is declared once, here.
    """

    help: str
    """What the option does; also the field's documentation."""
    cli: bool = True
    """Whether the command line sets it; False for Python-only values (callables)."""
    flag: str | None = None
    """The flag, when not ``--`` + the field name with dashes."""
    parse: Callable[[str], Any] | None = None
    """Turns the flag's text into the field's value (``None``: the text itself; bools are switches)."""
    commands: tuple[str, ...] = COMMANDS
    """The CLI commands that take it."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """A command's own default where it differs from the field's."""
    report: Callable[[Any], Any] | None = None
    """The value the report's JSON ``options`` shows for it; ``None``: not shown."""


def _option(**option: Any) -> dict[str, Option]:
    """A field's metadata: its ``Option``."""
    return {"option": Option(**option)}


def options() -> list[tuple[Field[Any], Option]]:
    """Every ``SimulationConfig`` field with its ``Option``, in declaration order."""
    return [(f, f.metadata["option"]) for f in fields(SimulationConfig)]


def _same(value: Any) -> Any:
    return value


def _dtype_name(value: torch.dtype | None) -> str | None:
    return str(value).removeprefix("torch.") if value else None


def _optimizer_name(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else "custom"


def _optimizer_flag(text: str) -> str | None:
    """``--optimizer``: a name, checked here so that a command-line user is not offered a callable."""
    if text.lower() == "none":
        return None
    if canonical_optimizer(text) is None:
        raise ArgumentTypeError(f"unknown optimizer {text!r}; choose one of: {', '.join(OPTIMIZERS)}, or none")
    return text


@dataclass(kw_only=True)
class SimulationConfig:
    """Everything ``simulate`` needs besides the model; ``__post_init__`` rejects bad values.

    Each field's ``Option`` (its metadata) documents it and says how the CLI and the report show it.
    """

    task: Task = field(default="train", metadata=_option(help="train, forward or generate"))
    batch_size: int = field(default=1, metadata=_option(help="sequences per step", parse=int, report=_same))
    seq_len: int = field(default=512, metadata=_option(help="tokens per sequence", parse=int, report=_same))
    device: str = field(
        default="h100",
        metadata=_option(
            help="target device (vramsim gpus), cpu, or custom:<memory>:<arch> for a GPU the catalog lacks (e.g. "
            "custom:48GiB:sm_89, custom:192GB:gfx942); validate measures on cpu",
            defaults={"validate": "cpu"},
        ),
    )
    dtype: torch.dtype | str | None = field(
        default=None,
        metadata=_option(
            help="weight dtype: fp32, bf16, fp16; none given: float32 to train, the config's torch_dtype for inference",
            report=_dtype_name,
        ),
    )
    mixed_precision: torch.dtype | str | None = field(
        default=None,
        metadata=_option(
            help="autocast dtype (bf16 or fp16) around the forward pass; weights stay in --dtype", report=_dtype_name
        ),
    )
    optimizer: str | Callable[..., torch.optim.Optimizer] | None = field(
        default="adamw",
        metadata=_option(
            help=f"{', '.join(OPTIMIZERS)} or none (vramsim/workload/optimizers.py); adamw: the Trainer's default, fused AdamW; "
            "transformers' optim names work too; Python: also a callable params -> Optimizer",
            parse=_optimizer_flag,
            report=_optimizer_name,
        ),
    )
    checkpointing: str = field(
        default="none",
        metadata=_option(
            help="activation checkpointing: none, full, every:K, selective, selective:torchtitan (its op-level SAC: every "
            "second matmul recomputed), first:F[+selective[:torchtitan]:S] (the first F layers in full, the next S "
            "selectively), auto (the per-layer mix that fits with the fewest recomputed FLOPs), offload, or all for a table "
            "of each (estimators/checkpointing.py; computed from one trace without checkpointing)",
            report=_same,
        ),
    )
    gradient_checkpointing: bool = field(default=False, metadata=_option(help="alias of --checkpointing full"))
    grad_accum: int = field(
        default=1,
        metadata=_option(
            help="gradient accumulation: micro-steps of --batch-size each per optimizer step; gradients add up in .grad",
            parse=int,
            report=_same,
        ),
    )
    max_grad_norm: float | None = field(
        default=None,
        metadata=_option(
            help="clip gradients to this total norm before the step (torch.nn.utils.clip_grad_norm_, foreach)",
            parse=float,
            report=_same,
        ),
    )
    keep_outputs: bool = field(
        default=False,
        metadata=_option(
            help="hold the model's outputs (logits) through backward, as the plain loop out = model(**batch); "
            "out.loss.backward() does; otherwise they are released before backward, as the HF Trainer does",
            report=_same,
        ),
    )
    lora: Any = field(
        default=None,
        metadata=_option(
            help="train LoRA adapters of this rank (peft; Python: the rank, a peft.LoraConfig or a dict of its arguments)",
            flag="--lora-rank",
            parse=int,
            report=lambda value: value is not None,
        ),
    )
    quantization: Any = field(
        default=None,
        metadata=_option(
            help=f"quantized weights: {', '.join(QUANTIZATIONS)} (bitsandbytes 4-bit, QLoRA's base; -dq: double "
            "quantization; int8: LLM.int8; gptq/awq: 4-bit, group 128, gptqmodel's Marlin kernel; fp8: e4m3 weights in "
            "128x128 blocks, sm 8.9+; fp8-rowwise: torchao float8 per row; int8wo, int4wo: torchao int8/int4 weight-only "
            "(int4wo: mslk's sm90 kernel; int4wo-tinygemm: torch's tinygemm, sm 8.0+); "
            "the torchao ones need torchao), quantized by the library itself "
            "(vramsim/workload/quantization/weights.py; Python: also transformers' BitsAndBytesConfig, GPTQConfig, AwqConfig, "
            "FineGrainedFP8Config, TorchAoConfig)",
            report=lambda value: value if isinstance(value, str) or value is None else type(value).__name__,
        ),
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata=_option(help="decode steps for --task generate; none given: 16 there, 0 elsewhere", parse=int, report=_same),
    )
    cache_implementation: str = field(
        default="dynamic",
        metadata=_option(
            help="--task generate: transformers' KV cache, dynamic (DynamicCache, grows a token per step) or static "
            "(StaticCache of prompt + new tokens, allocated at the prefill, as generate(cache_implementation='static'))",
            report=_same,
        ),
    )
    inputs: Callable[[int, int], dict[str, Any]] | None = field(
        default=None,
        metadata=_option(
            help="(batch_size, seq_len) -> the model's keyword inputs; on the command line path/to/file.py:function"
        ),
    )
    loss: Callable[[Any], torch.Tensor] | str | None = field(
        default=None,
        metadata=_option(
            help="model (its own loss), liger-flce (Liger's fused linear cross-entropy), chunked-ce[:N] (torchtune's, 8 "
            "chunks unless N; vramsim/workload/losses.py), or path/to/file.py:function (Python: a callable output -> loss)",
            report=lambda value: value if isinstance(value, str) else ("model" if value is None else "custom"),
        ),
    )
    model_class: str | None = field(
        default=None, metadata=_option(help="transformers class, e.g. AutoModelForSequenceClassification")
    )
    attn_implementation: str | None = field(
        default=None,
        metadata=_option(
            help="transformers' attention kernel: eager, sdpa, flash_attention_2, flash_attention_3 or flex_attention; "
            "none given: what transformers picks (sdpa where the model supports it, else eager)"
        ),
    )
    # The report's options name the implementation in force (the model's config after the build), not this request.
    torch_empty_cache_steps: int | None = field(
        default=None,
        metadata=_option(
            help="the HF Trainer's torch_empty_cache_steps: torch.cuda.empty_cache() after the loss, before backward, every N "
            "steps (global_step %% N == 0), in the allocator replay",
            parse=int,
            report=_same,
            commands=("trace",),
        ),
    )
    trust_remote_code: bool = field(default=False, metadata=_option(help="allow code from the model's Hub repository"))
    compile: bool = field(
        default=False,
        metadata=_option(
            help="torch.compile the model (training): the saved tensors AOTAutograd's min-cut partitioner chooses, each "
            "op's output materialised (inductor's fusion is not modelled, vramsim/workload/compiled.py)",
            report=_same,
        ),
    )
    expandable_segments: bool = field(
        default=False,
        metadata=_option(
            help="model PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the allocator replay", commands=("trace",)
        ),
    )
    cuda_module_loading: ModuleLoading = field(
        default="lazy",
        metadata=_option(
            help="CUDA_MODULE_LOADING of the run: lazy (PyTorch's setting since CUDA 11.7) or eager (CUDA before 11.7, "
            "or set so): the context then holds every kernel of libtorch_cuda, a figure measured per architecture "
            "(estimators/assumptions.py)",
            report=_same,
            commands=("trace",),
        ),
    )
    torch_autograd: TorchAutograd = field(
        default="installed",
        metadata=_option(
            help="whose autograd formulas the trace keeps tensors by: installed (this torch's) or 1.10 (PyTorch before 1.11, "
            "whose softmax and log_softmax saved their input beside their output), for a job on such a stack "
            "(tracer/kernels/legacy_autograd.py)",
            report=_same,
        ),
    )
    headroom: float = field(
        default=0.10,
        metadata=_option(
            help="share of device memory kept free when judging whether the job fits", parse=float, commands=("trace",)
        ),
    )
    gpus: int = field(
        default=1,
        metadata=_option(
            help="world size, dp x tp x pp: the data-parallel ranks (DDP replicas, or the ranks --zero / --fsdp shard "
            "over, estimators/sharding.py) are gpus / (tp x pp)",
            parse=int,
            report=_same,
        ),
    )
    dp: int | None = field(
        default=None,
        metadata=_option(
            help="data-parallel ranks instead of --gpus: gpus = dp x tp x pp (the context- and expert-parallel ranks are "
            "among the dp ranks, as torchtitan borrows them from its data-parallel mesh)",
            parse=int,
            report=_same,
            commands=("trace",),
        ),
    )
    zero: int = field(
        default=0,
        metadata=_option(
            help="DeepSpeed ZeRO stage: 0 (none), 1 (optimizer states), 2 (+ gradients), 3 (+ weights) sharded over --gpus",
            parse=int,
            report=_same,
        ),
    )
    fsdp: str = field(
        default="no",
        metadata=_option(
            help="FSDP2 fully_shard per block: full (reshard_after_forward=True, FULL_SHARD), grad-op (False, "
            "SHARD_GRAD_OP) or no",
            report=_same,
        ),
    )
    gradient_as_bucket_view: bool = field(
        default=False,
        metadata=_option(
            help="DDP's gradient_as_bucket_view=True: each .grad is a view into its gradient bucket (DDP only)", report=_same
        ),
    )
    offload_states: str = field(
        default="none",
        metadata=_option(
            help="CPU offload of sharded model states: optimizer (ZeRO offload_optimizer: fp32 master, gradients, "
            "optimizer states on the host), params (also the weights: ZeRO-3 offload_param, FSDP2 CPUOffloadPolicy) "
            "or none",
            report=_same,
        ),
    )
    shard_group_size: int | None = field(
        default=None,
        metadata=_option(
            help="--fsdp hybrid (HSDP): ranks each shard group holds, replicated across groups; none given: a node's 8 "
            "GPUs (or every rank when fewer)",
            parse=int,
            report=_same,
        ),
    )
    training_args: Any = field(
        default=None,
        repr=False,
        metadata=_option(
            help="transformers' TrainingArguments: per-device batch, gradient accumulation, clipping, optim, bf16/fp16, "
            "gradient checkpointing, torch_empty_cache_steps, torch_compile, its deepspeed config and fsdp settings set the "
            "matching options (vramsim/config/launch_files.py); give gpus, which is the launcher's",
            cli=False,
        ),
    )
    deepspeed: str | None = field(
        default=None,
        metadata=_option(
            help="a DeepSpeed ds_config.json: zero_optimization (stage, offload_optimizer/offload_param devices, bucket "
            "sizes), bf16/fp16 and train_micro_batch_size_per_gpu set the matching options (vramsim/config/launch_files.py)",
            report=_same,
        ),
    )
    accelerate_config: str | None = field(
        default=None,
        metadata=_option(
            help="accelerate's config file (default_config.yaml): distributed_type, num_processes, mixed_precision and its "
            "fsdp_config / deepspeed_config set the matching options",
            report=_same,
        ),
    )
    zero_settings: ZeroSettings | None = field(
        default=None,
        repr=False,
        metadata=_option(
            help="DeepSpeed's zero_optimization sizes (reduce and prefetch buckets, live and persistent parameters); none "
            "given: DeepSpeed's defaults, or the --deepspeed file's",
            cli=False,
        ),
    )
    tp: int = field(
        default=1,
        metadata=_option(
            help="tensor-parallel ranks: Megatron's split of attention, MLP, embedding and loss (vramsim/workload/parallel/tensor.py)",
            parse=int,
            report=_same,
        ),
    )
    ep: int = field(
        default=1,
        metadata=_option(
            help="expert-parallel ranks for MoE decoders (Mixtral, Qwen-MoE), taken from the data-parallel ranks: each "
            "holds num_experts / ep experts, routed tokens go to their experts' rank by all-to-all, balanced routing; "
            "--zero/--fsdp shard the experts over gpus / (tp x pp x ep) ranks (vramsim/workload/parallel/expert.py)",
            parse=int,
            report=_same,
        ),
    )
    cp: int = field(
        default=1,
        metadata=_option(
            help="context-parallel ranks: each runs seq_len / cp tokens and passes K/V round a ring in each SDPA call (torch's "
            "context_parallel, estimators/context_parallel.py)",
            parse=int,
            report=_same,
            commands=("trace",),
        ),
    )
    pp: int = field(
        default=1,
        metadata=_option(
            help="pipeline stages: the decoder layers split evenly, embedding first, head and loss last (estimators/pipeline.py)",
            parse=int,
            report=_same,
            commands=("trace",),
        ),
    )
    pp_schedule: str = field(
        default="1f1b",
        metadata=_option(
            help="pipeline schedule: gpipe, 1f1b or interleaved-1f1b (torch.distributed.pipelining)",
            report=_same,
            commands=("trace",),
        ),
    )
    micro_batches: int | None = field(
        default=None,
        metadata=_option(
            help="micro-batches per step through the pipeline, each of --batch-size sequences; none given: --pp",
            parse=int,
            report=_same,
            commands=("trace",),
        ),
    )
    pp_virtual_stages: int = field(
        default=2,
        metadata=_option(
            help="model chunks per pipeline rank with --pp-schedule interleaved-1f1b",
            parse=int,
            report=_same,
            commands=("trace",),
        ),
    )
    moe_routing: str = field(
        default="balanced",
        metadata=_option(
            help="load MoE routers give experts: balanced, worst-case or capacity:F (tracer/data_dependent/)", report=_same
        ),
    )
    height: int | None = field(
        default=None,
        metadata=_option(
            help="diffusion pipelines: image height in pixels (none given: the pipeline's default, e.g. 1024 for SDXL)",
            parse=int,
            report=_same,
        ),
    )
    width: int | None = field(
        default=None,
        metadata=_option(
            help="diffusion pipelines: image width in pixels (none given: the pipeline's default)", parse=int, report=_same
        ),
    )
    num_inference_steps: int | None = field(
        default=None,
        metadata=_option(
            help="diffusion pipelines: denoising steps (none given: the pipeline's default, e.g. 50 for SDXL, 28 for FLUX)",
            parse=int,
            report=_same,
        ),
    )
    max_sequence_length: int | None = field(
        default=None,
        metadata=_option(
            help="FLUX, SD3, PixArt, Wan and LTX pipelines: tokens the T5 prompt is padded to (none given: the pipeline's "
            "default, 512 for FLUX.1-dev and Wan, 256 for schnell and SD3, 300 for PixArt, 128 for LTX)",
            parse=int,
            report=_same,
        ),
    )
    guidance_scale: float | None = field(
        default=None,
        metadata=_option(
            help="diffusion pipelines: classifier-free guidance scale; > 1 doubles the denoiser's batch (none given: the "
            "pipeline's default)",
            parse=float,
            report=_same,
        ),
    )
    num_images: int = field(
        default=1,
        metadata=_option(help="diffusion pipelines: images per prompt (num_images_per_prompt)", parse=int, report=_same),
    )
    num_frames: int | None = field(
        default=None,
        metadata=_option(
            help="video pipelines: frames to generate (none given: the pipeline's default, 81 for Wan 2.1, 161 for LTX)",
            parse=int,
            report=_same,
        ),
    )
    vae_tiling: bool = field(
        default=False,
        metadata=_option(help="diffusion pipelines: vae.enable_tiling(), decode large latents tile by tile", report=_same),
    )
    vae_slicing: bool = field(
        default=False,
        metadata=_option(help="diffusion pipelines: vae.enable_slicing(), decode the images one at a time", report=_same),
    )
    attention_slicing: str | None = field(
        default=None,
        metadata=_option(
            help="diffusion pipelines with a UNet: pipe.enable_attention_slicing(slice_size): auto (half the heads at a "
            "time), max (one head at a time) or a slice size",
            report=_same,
        ),
    )
    offload: str = field(
        default="no",
        metadata=_option(
            help="diffusion pipelines: CPU offload as diffusers does it: model (enable_model_cpu_offload: only the running "
            "component's weights on the device), sequential (enable_sequential_cpu_offload: only the running layer's) or no",
            report=_same,
        ),
    )
    cache_latents: bool = field(
        default=False,
        metadata=_option(
            help="training a diffusion pipeline: the latents are cached (diffusers' scripts' --cache_latents), so the VAE is "
            "not on the device during the step",
            report=_same,
        ),
    )
    cache_text_embeddings: bool = field(
        default=False,
        metadata=_option(
            help="training a diffusion pipeline: the prompt's embeddings are precomputed and the text encoders deleted, as "
            "the DreamBooth scripts do for one instance prompt",
            report=_same,
        ),
    )
    ema: bool = field(
        default=False,
        metadata=_option(
            help="training a diffusion pipeline's whole denoiser: diffusers' EMAModel (the scripts' --use_ema) keeps an fp32 "
            "copy of the trained weights on the device and updates it after each optimizer step",
            report=_same,
        ),
    )
    steps: int = field(
        default=2,
        repr=False,
        metadata=_option(
            help="steps run; the last one's peak is reported: from 2 steps on a steady state, with 1 the first step's "
            "(a sweep that only asks whether a program traces)",
            cli=False,
        ),
    )

    @property
    def sharding(self) -> ShardingPlan:
        """The data-parallel plan of ``gpus``, ``zero`` and ``fsdp`` (checked in ``__post_init__``)."""
        return sharding_plan(
            self.gpus // (self.tp * self.pp),
            self.zero,
            self.fsdp,
            self.gradient_as_bucket_view,
            offload=self.offload_states,
            shard_group=self.shard_group_size,
            zero_settings=self.zero_settings,
            pipelined=self.pp > 1,
            expert_parallel=self.ep,
        )

    @property
    def pipeline(self) -> PipelinePlan:
        """The pipeline plan of ``pp``, ``pp_schedule`` and ``micro_batches`` (checked in ``__post_init__``)."""
        return pipeline_plan(self.pp, self.pp_schedule, self.micro_batches, self.pp_virtual_stages)

    @classmethod
    def from_options(cls, **options: Any) -> SimulationConfig:
        """Like the constructor, but an unknown option is a ConfigError naming the choices."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r}; choose from: {', '.join(sorted(names))}")
        return cls(**options)

    def __post_init__(self) -> None:
        if self.training_args is not None:
            _apply_launch_file(self, read_training_arguments(self.training_args))
        if self.deepspeed is not None:
            _apply_launch_file(self, read_deepspeed_config(self.deepspeed))
        if self.accelerate_config is not None:
            _apply_launch_file(self, read_accelerate_config(self.accelerate_config))
        if self.task not in TASKS:
            raise ConfigError(f"unknown task {self.task!r}; choose one of: {', '.join(TASKS)}")
        _check_count("batch_size", self.batch_size, MAX_BATCH)
        _check_count("seq_len", self.seq_len, MAX_SEQ_LEN)
        self.dtype = _dtype("dtype", self.dtype, _DTYPE_NAMES)
        self.mixed_precision = _dtype("mixed_precision", self.mixed_precision, _MIXED_NAMES)
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
        if self.attn_implementation is not None and self.attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ConfigError(
                f"unknown attn_implementation {self.attn_implementation!r}; choose one of: {', '.join(ATTN_IMPLEMENTATIONS)}"
            )
        _check_compile(self)
        if self.max_new_tokens is None:
            self.max_new_tokens = 16 if self.task == "generate" else 0
        elif self.max_new_tokens and self.task != "generate":
            raise ConfigError(f"max_new_tokens is for task='generate'; task={self.task!r} decodes no new tokens")
        _check_count("max_new_tokens", self.max_new_tokens, MAX_SEQ_LEN, allow_zero=self.task != "generate")
        if self.cache_implementation not in ("dynamic", "static"):
            raise ConfigError(f"unknown cache_implementation {self.cache_implementation!r}; choose one of: dynamic, static")
        if self.cache_implementation == "static" and self.task != "generate":
            raise ConfigError(f"cache_implementation='static' is the generate loop's cache; task='{self.task}' keeps none")
        if self.cuda_module_loading not in ("lazy", "eager"):
            raise ConfigError(f"unknown cuda_module_loading {self.cuda_module_loading!r}; choose one of: lazy, eager")
        if self.torch_autograd not in ("installed", "1.10"):
            raise ConfigError(f"unknown torch_autograd {self.torch_autograd!r}; choose one of: installed, 1.10")
        if isinstance(self.headroom, bool) or not isinstance(self.headroom, (int, float)) or not 0 <= self.headroom < 1:
            raise ConfigError(f"headroom must be a fraction in [0, 1), got {self.headroom!r}")
        try:
            from vramsim.tracer.data_dependent import parse_routing  # torch, once arguments are parsed

            self.moe_routing = parse_routing(self.moe_routing).spec
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        alias = self.gradient_checkpointing and self.checkpointing == "none"
        try:
            plan = parse_checkpointing("full" if alias else self.checkpointing)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.gradient_checkpointing and plan.kind != "full":
            raise ConfigError(
                f"gradient_checkpointing is checkpointing='full'; it contradicts checkpointing={self.checkpointing!r}"
            )
        self.checkpointing = plan.spec
        self.gradient_checkpointing = plan.kind == "full"
        _check_model_parallel(self)
        try:
            sharding = self.sharding
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.fsdp = sharding.fsdp
        self.offload_states = sharding.offload
        if sharding.offload != "none" and self.device.lower() == "cpu":
            raise ConfigError(
                "offload_states moves model states to host memory, which is the cpu target's own memory; use a GPU target"
            )
        if (sharding.zero or sharding.fsdp != "no") and self.task != "train":
            which = f"zero={sharding.zero}" if sharding.zero else f"fsdp={sharding.fsdp!r}"
            raise ConfigError(f"{which} would shard training state; task={self.task!r} has none (gpus alone replicates)")
        if sharding.bucket_view and (sharding.gpus == 1 or self.task != "train"):
            raise ConfigError("gradient_as_bucket_view shapes DDP's gradient buckets: it needs task='train' and gpus=N > 1")
        if self.task != "train" and self.optimizer not in (None, "adamw"):
            raise ConfigError(f"optimizer={_optimizer_name(self.optimizer)!r} is for training; task={self.task!r} takes no step")
        _check_training_loop(self)
        _check_loss(self)
        if self.torch_empty_cache_steps is not None:
            _check_count("torch_empty_cache_steps", self.torch_empty_cache_steps, 1 << 20)
            if self.task != "train":
                raise ConfigError(f"torch_empty_cache_steps is the Trainer's training step; task={self.task!r} runs none")
        if isinstance(self.lora, int) and not isinstance(self.lora, bool):
            _check_count("lora", self.lora, 1 << 16)
            self.lora = lora_of_rank(self.lora)
        if isinstance(self.quantization, str) and self.quantization.lower() not in QUANTIZATIONS:
            raise ConfigError(f"unknown quantization {self.quantization!r}; choose one of: {', '.join(QUANTIZATIONS)}")
        _check_image(self)
        if self.steps < 1:
            raise ConfigError(f"steps must be at least 1, got {self.steps}")


def _check_compile(config: SimulationConfig) -> None:
    """``--compile`` is modelled for one device's training step (vramsim/workload/compiled.py)."""
    if not config.compile:
        return
    if config.task != "train":
        raise UnsupportedError(
            f"compile with task='{config.task}' is not modelled: without a backward, what compile changes is "
            "inductor's fusion, which vramsim does not model; compile is modelled for training (vramsim/workload/compiled.py)"
        )
    others = {
        "checkpointing": config.checkpointing != "none" or config.gradient_checkpointing,
        "gpus": config.gpus > 1,
        "tp": config.tp > 1,
        "pp": config.pp > 1,
        "quantization": config.quantization is not None,
        "mixed_precision": config.mixed_precision is not None,
    }
    named = [name for name, on in others.items() if on]
    if named:
        raise UnsupportedError(f"compile with {', '.join(named)} is not modelled yet; compile models one device's step")


def _check_training_loop(config: SimulationConfig) -> None:
    """Accumulation, clipping and kept outputs shape a training step; accumulation is not combined with
    the data- and pipeline-parallel what-ifs, which read one forward and one backward per step."""
    _check_count("grad_accum", config.grad_accum, 1 << 12)
    norm = config.max_grad_norm
    if norm is not None and (isinstance(norm, bool) or not isinstance(norm, (int, float)) or not norm > 0):
        raise ConfigError(f"max_grad_norm must be a number > 0, got {norm!r}")
    if config.task != "train" and (config.grad_accum > 1 or norm is not None or config.keep_outputs):
        raise ConfigError(f"grad_accum, max_grad_norm and keep_outputs shape a training step; task='{config.task}' takes none")
    if config.grad_accum > 1 and (config.gpus > 1 or config.zero or config.fsdp != "no" or config.pp > 1):
        raise UnsupportedError(
            "grad_accum with gpus, zero, fsdp or pp is not modelled yet (pipeline micro-batches are --micro-batches)"
        )


def _check_loss(config: SimulationConfig) -> None:
    """A named loss is a spec string (``model`` is none); it replaces a training step's loss on one rank's whole model."""
    if not isinstance(config.loss, str):
        if config.loss is not None and not callable(config.loss):
            raise ConfigError(f"loss must be a name or a callable, not {type(config.loss).__name__}")
        return
    named = parse_loss(config.loss)
    config.loss = None if named is None else named.spec
    if named is not None and config.task != "train":
        raise ConfigError(f"loss={named.spec!r} is a training loss; task={config.task!r} computes none")
    if named is not None and (config.tp > 1 or config.pp > 1):
        raise UnsupportedError(f"loss={named.spec!r} with tp or pp is not modelled yet")


def _apply_launch_file(config: SimulationConfig, launch: LaunchOptions) -> None:
    """The file's options fill in those left at their defaults; one set otherwise must agree with the file."""
    defaults = {f.name: f.default for f in fields(SimulationConfig)}
    for name, value in launch.options.items():
        current = getattr(config, name)
        if current == defaults[name]:
            setattr(config, name, value)
        elif str(current).lower() != str(value).lower():
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} {current} contradicts {launch.source}, which sets {name} = {value}")
    if launch.zero_settings is not None:
        if config.zero_settings not in (None, launch.zero_settings):
            raise ConfigError(f"zero_settings contradicts {launch.source}'s zero_optimization sizes")
        config.zero_settings = launch.zero_settings


def _check_image(config: SimulationConfig) -> None:
    """Diffusion options: sizes the VAE can decode (multiples of 8, as the pipelines require), counts of at least 1."""
    for name in ("height", "width"):
        value = getattr(config, name)
        if value is not None:
            _check_count(name, value, 1 << 16)
            if value % 8:
                raise ConfigError(f"{name} must be a multiple of 8 (the VAE's downsampling), got {value}")
    for name, most in (("num_inference_steps", 10_000), ("max_sequence_length", 1 << 16), ("num_frames", 10_000)):
        if getattr(config, name) is not None:
            _check_count(name, getattr(config, name), most)
    _check_count("num_images", config.num_images, 1024)
    slicing = config.attention_slicing
    if slicing is not None and slicing not in ("auto", "max") and not (str(slicing).isdigit() and int(slicing) >= 1):
        raise ConfigError(f"attention_slicing is auto, max or a slice size of at least 1, got {slicing!r}")
    if config.offload not in ("no", "model", "sequential"):
        raise ConfigError(f"unknown offload {config.offload!r}; choose one of: no, model, sequential")
    if config.offload != "no" and config.device.lower() == "cpu":
        raise ConfigError("offload moves weights to host memory, which is the cpu target's own memory; use a GPU target")
    if config.ema and config.task != "train":
        raise ConfigError(f"ema averages the weights a training step updates; task='{config.task}' trains nothing")
    if (config.cache_latents or config.cache_text_embeddings) and config.task != "train":
        raise ConfigError(
            f"cache_latents and cache_text_embeddings shape a pipeline's training step; task='{config.task}' trains nothing"
        )
    scale = config.guidance_scale
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale < 0):
        raise ConfigError(f"guidance_scale must be a number >= 0, got {scale!r}")


def _check_model_parallel(config: SimulationConfig) -> None:
    """``gpus`` = dp x tp x pp; the pipeline is a training what-if, over data-parallel ranks as DeepSpeed allows."""
    gpus = config.gpus
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise ConfigError(f"gpus must be an integer between 1 and {MAX_GPUS}, got {gpus!r}")
    for name in ("tp", "pp", "ep", "cp"):
        _check_count(name, getattr(config, name), MAX_GPUS)
    if config.dp is not None:
        _check_count("dp", config.dp, MAX_GPUS)
        world = config.dp * config.tp * config.pp
        if config.gpus not in (1, world):
            raise ConfigError(
                f"dp={config.dp} x tp={config.tp} x pp={config.pp} is {world} GPUs, not gpus={config.gpus}: give --dp or --gpus"
            )
        config.gpus = world
    if config.gpus == 1:  # the default: as many GPUs as the model-parallel ranks need
        config.gpus = config.tp * config.pp * config.ep * config.cp
    _check_expert_parallel(config)
    _check_context_parallel(config)
    if config.gpus % (config.tp * config.pp):
        raise ConfigError(f"gpus={config.gpus} is dp x tp x pp; it must be a multiple of tp x pp = {config.tp * config.pp}")
    try:
        plan = pipeline_plan(config.pp, config.pp_schedule, config.micro_batches, config.pp_virtual_stages)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config.pp_schedule = plan.schedule
    if plan.active and config.task != "train":
        raise ConfigError(
            f"pp={config.pp} models a training pipeline's micro-batches in flight; task={config.task!r} is not training"
        )
    if plan.active and config.zero > 1:
        raise UnsupportedError(
            f"DeepSpeed refuses ZeRO-{config.zero} with pipeline parallelism (its PipelineEngine "
            "asserts zero_optimization_stage() < 2); use zero=1 or fsdp"
        )
    if plan.active and str(config.offload_states).strip().lower() != "none":
        raise UnsupportedError("offload_states with pp is not modelled yet")


def _check_context_parallel(config: SimulationConfig) -> None:
    """``cp``: the sequence split round-robin in two chunks per rank (causal load balance); the cp ranks are
    data-parallel ranks for the weights (torchtitan shards them over dp x cp), so gpus is a multiple of tp x pp x cp."""
    if config.cp == 1:
        return
    if config.task != "train":
        raise UnsupportedError(f"cp is modelled for training; task={config.task!r} is not")
    if config.seq_len % (2 * config.cp):
        raise ConfigError(
            f"cp={config.cp} splits the sequence into 2 x cp chunks (load-balanced causal ring); seq_len "
            f"{config.seq_len} is not a multiple of {2 * config.cp}"
        )
    if config.ep > 1 or config.inputs is not None:
        raise UnsupportedError("cp with ep or custom inputs is not modelled yet")
    if config.gpus % (config.tp * config.pp * config.cp):
        raise ConfigError(f"gpus={config.gpus} must be a multiple of tp x pp x cp = {config.tp * config.pp * config.cp}")


def _check_expert_parallel(config: SimulationConfig) -> None:
    """``ep``: expert-parallel ranks among the data-parallel ranks of a training step (torchtitan's EP within
    dp_shard, DeepSpeed-MoE's expert-data-parallel groups), under balanced routing."""
    if config.ep == 1:
        return
    if config.task != "train":
        raise UnsupportedError(f"ep is modelled for training; task={config.task!r} is not")
    if config.gpus % (config.tp * config.pp * config.ep):
        raise ConfigError(
            f"ep={config.ep} borrows expert-parallel ranks from the data-parallel ones: gpus={config.gpus} "
            f"must be a multiple of tp x pp x ep = {config.tp * config.pp * config.ep}"
        )
    if config.moe_routing != "balanced":
        raise UnsupportedError(
            f"ep is modelled under balanced routing (each rank receives as many routed rows as it "
            f"sends); moe_routing={config.moe_routing!r} with ep is not"
        )


def _check_count(name: str, value: Any, limit: int, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    low = 0 if allow_zero else 1
    if not low <= value <= limit:
        raise ConfigError(f"{name} must be between {low} and {limit}, got {value}")


def __getattr__(name: str) -> Any:
    """``DTYPES`` and ``MIXED_PRECISION``: the names taken -> torch dtypes, made when first read (torch loads then)."""
    if name in ("DTYPES", "MIXED_PRECISION"):
        return _torch_dtypes(_DTYPE_NAMES if name == "DTYPES" else _MIXED_NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _torch_dtypes(names: dict[str, str]) -> dict[str, torch.dtype]:
    import torch

    return {name: getattr(torch, attr) for name, attr in names.items()}


def _dtype(name: str, value: Any, names: dict[str, str]) -> torch.dtype | None:
    import torch

    choices = _torch_dtypes(names)
    if value is None or (isinstance(value, torch.dtype) and value in choices.values()):
        return value
    if isinstance(value, str) and value.lower().removeprefix("torch.") in choices:
        return choices[value.lower().removeprefix("torch.")]
    raise ConfigError(f"unsupported {name} {value!r}; choose one of: {', '.join(choices)}")
