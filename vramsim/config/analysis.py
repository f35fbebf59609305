"""The options computed from the traced graph, not traced: checkpointing, data and pipeline parallelism, the
allocator. Variants of one trace may differ in these only."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from vramsim.config.checks import check_count
from vramsim.config.options import as_is, option
from vramsim.config.workload import WorkloadOptions
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import ModuleLoading
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.estimators.pipeline_schedule import PipelinePlan, pipeline_plan
from vramsim.estimators.sharding import MAX_GPUS, ShardingPlan

__all__ = ["ANALYSIS_OPTIONS", "AnalysisOptions"]


@dataclass(kw_only=True)
class AnalysisOptions:
    """What-ifs over one traced graph: each is computed from the trace, none changes it."""

    checkpointing: str = field(
        default="none",
        metadata=option(
            help="activation checkpointing: none, full, every:K, selective, selective:torchtitan (its op-level SAC: every "
            "second matmul recomputed), first:F[+selective[:torchtitan]:S] (the first F layers in full, the next S "
            "selectively), auto (the per-layer mix that fits with the fewest recomputed FLOPs), offload, or all for a table "
            "of each (estimators/checkpointing.py; computed from one trace without checkpointing)",
            report=as_is,
        ),
    )
    gradient_checkpointing: bool = field(default=False, metadata=option(help="alias of --checkpointing full"))
    activation_offloading: bool = field(
        default=False,
        metadata=option(
            help="torchtune's enable_activation_offloading (OffloadActivations with streams) on top of --checkpointing: "
            "saved activations of 1 KiB or more go to pinned host memory, the last 5 kept on the device until copied, "
            "each brought back when backward reads it; the head and loss stay (estimators/activation_offloading.py)",
            report=as_is,
        ),
    )
    torch_empty_cache_steps: int | None = field(
        default=None,
        metadata=option(
            help="the HF Trainer's torch_empty_cache_steps: torch.cuda.empty_cache() after the loss, before backward, every N "
            "steps (global_step %% N == 0), in the allocator replay",
            parse=int,
            report=as_is,
            commands=("trace",),
        ),
    )
    expandable_segments: bool = field(
        default=False,
        metadata=option(
            help="model PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the allocator replay", commands=("trace",)
        ),
    )
    cuda_module_loading: ModuleLoading = field(
        default="lazy",
        metadata=option(
            help="CUDA_MODULE_LOADING of the run: lazy (PyTorch's setting since CUDA 11.7) or eager (CUDA before 11.7, "
            "or set so): the context then holds every kernel of libtorch_cuda, a figure measured per architecture "
            "(estimators/assumptions.py)",
            report=as_is,
            commands=("trace",),
        ),
    )
    memory_history: bool = field(
        default=False,
        metadata=option(
            cli=False,
            help="keep the caching allocator's history over the report's replay (Report.memory_history), what "
            "--memory-viz and --chrome-trace write (docs/exports.md)",
        ),
    )
    headroom: float = field(
        default=0.10,
        metadata=option(
            help="share of device memory kept free when judging whether the job fits", parse=float, commands=("trace",)
        ),
    )
    gpus: int = field(
        default=1,
        metadata=option(
            help="world size, dp x tp x pp: the data-parallel ranks (DDP replicas, or the ranks --zero / --fsdp shard "
            "over, estimators/sharding.py) are gpus / (tp x pp)",
            parse=int,
            report=as_is,
        ),
    )
    zero: int = field(
        default=0,
        metadata=option(
            help="DeepSpeed ZeRO stage: 0 (none), 1 (optimizer states), 2 (+ gradients), 3 (+ weights) sharded over --gpus",
            parse=int,
            report=as_is,
        ),
    )
    fsdp: str = field(
        default="no",
        metadata=option(
            help="FSDP2 fully_shard per block: full (reshard_after_forward=True, FULL_SHARD), grad-op (False, "
            "SHARD_GRAD_OP) or no",
            report=as_is,
        ),
    )
    gradient_as_bucket_view: bool = field(
        default=False,
        metadata=option(
            help="DDP's gradient_as_bucket_view=True: each .grad is a view into its gradient bucket (DDP only)", report=as_is
        ),
    )
    offload_states: str = field(
        default="none",
        metadata=option(
            help="CPU offload of sharded model states: optimizer (ZeRO offload_optimizer: fp32 master, gradients, "
            "optimizer states on the host), params (also the weights: ZeRO-3 offload_param, FSDP2 CPUOffloadPolicy) "
            "or none",
            report=as_is,
        ),
    )
    shard_group_size: int | None = field(
        default=None,
        metadata=option(
            help="--fsdp hybrid (HSDP): ranks each shard group holds, replicated across groups; none given: a node's 8 "
            "GPUs (or every rank when fewer)",
            parse=int,
            report=as_is,
        ),
    )
    pp: int = field(
        default=1,
        metadata=option(
            help="pipeline stages: the decoder layers split evenly, embedding first, head and loss last "
            "(estimators/pipeline_parallel.py)",
            parse=int,
            report=as_is,
            commands=("trace",),
        ),
    )
    pp_schedule: str = field(
        default="1f1b",
        metadata=option(
            help="pipeline schedule: gpipe, 1f1b or interleaved-1f1b (torch.distributed.pipelining)",
            report=as_is,
            commands=("trace",),
        ),
    )
    micro_batches: int | None = field(
        default=None,
        metadata=option(
            help="micro-batches per step through the pipeline, each of --batch-size sequences; none given: --pp",
            parse=int,
            report=as_is,
            commands=("trace",),
        ),
    )
    pp_virtual_stages: int = field(
        default=2,
        metadata=option(
            help="model chunks per pipeline rank with --pp-schedule interleaved-1f1b",
            parse=int,
            report=as_is,
            commands=("trace",),
        ),
    )

    @property
    def pipeline_parallel(self) -> PipelinePlan:
        """The pipeline plan of ``pp``, ``pp_schedule`` and ``micro_batches`` (checked in ``__post_init__``)."""
        return pipeline_plan(self.pp, self.pp_schedule, self.micro_batches, self.pp_virtual_stages)

    def check_analysis(self, workload: WorkloadOptions) -> None:
        """The allocator's settings, the checkpointing spec and the pipeline; the world size is checked with the
        model-parallel ranks, the sharding once the world is known (``check_sharding``)."""
        if self.cuda_module_loading not in ("lazy", "eager"):
            raise ConfigError(f"unknown cuda_module_loading {self.cuda_module_loading!r}; choose one of: lazy, eager")
        if isinstance(self.headroom, bool) or not isinstance(self.headroom, (int, float)) or not 0 <= self.headroom < 1:
            raise ConfigError(f"headroom must be a fraction in [0, 1), got {self.headroom!r}")
        if self.torch_empty_cache_steps is not None:
            check_count("torch_empty_cache_steps", self.torch_empty_cache_steps, 1 << 20)
            if workload.task != "train":
                raise ConfigError(f"torch_empty_cache_steps is the Trainer's training step; task={workload.task!r} runs none")
        if self.memory_history and workload.device.lower() == "cpu":
            raise ConfigError(
                "memory_history (trace --memory-viz, --chrome-trace) replays a GPU's caching allocator; the cpu target has "
                "none: name a GPU (--device)"
            )
        self._check_checkpointing(workload)
        gpus = self.gpus
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
            raise ConfigError(f"gpus must be an integer between 1 and {MAX_GPUS}, got {gpus!r}")
        check_count("pp", self.pp, MAX_GPUS)
        self._check_pipeline(workload)

    def _check_checkpointing(self, workload: WorkloadOptions) -> None:
        """``gradient_checkpointing`` is ``checkpointing='full'``; the spec becomes its canonical form; it needs a
        training step, and offload a device besides the host."""
        alias = self.gradient_checkpointing and self.checkpointing == "none"
        try:
            plan = parse_checkpointing("full" if alias else self.checkpointing)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.gradient_checkpointing and plan.kind != "full":
            raise ConfigError(
                f"gradient_checkpointing is checkpointing='full'; it contradicts checkpointing={self.checkpointing!r}"
            )
        if plan.kind != "none" and workload.task != "train":
            raise ConfigError(f"checkpointing={plan.spec!r} applies to training; task={workload.task!r} saves no activations")
        if plan.kind == "offload" and workload.device.lower() == "cpu":
            raise ConfigError("offload moves activations to host memory, which is the cpu target's own memory; use a GPU target")
        self._check_activation_offloading(workload, plan.kind)
        self.checkpointing = plan.spec
        self.gradient_checkpointing = plan.kind == "full"

    def _check_activation_offloading(self, workload: WorkloadOptions, kind: str) -> None:
        """torchtune offloads to the host a training step's saved activations (it refuses a run without an
        accelerator); ``offload`` already moves every saved tensor."""
        if not self.activation_offloading:
            return
        if workload.task != "train":
            raise ConfigError(f"activation_offloading applies to training; task={workload.task!r} saves no activations")
        if workload.device.lower() == "cpu":
            raise ConfigError(
                "activation_offloading moves activations to host memory, which is the cpu target's own memory; use a GPU target"
            )
        if kind in ("offload", "all"):
            raise ConfigError(
                f"activation_offloading goes on top of checkpointing none or a checkpoint, not {kind!r} "
                "(offload already moves every saved tensor to the host)"
            )

    def _check_pipeline(self, workload: WorkloadOptions) -> None:
        """The pipeline is a training what-if, over data-parallel ranks as DeepSpeed allows."""
        try:
            plan = self.pipeline_parallel
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.pp_schedule = plan.schedule
        if plan.active and workload.task != "train":
            raise ConfigError(
                f"pp={self.pp} models a training pipeline's micro-batches in flight; task={workload.task!r} is not training"
            )
        if plan.active and self.zero > 1:
            raise UnsupportedError(
                f"DeepSpeed refuses ZeRO-{self.zero} with pipeline parallelism (its PipelineEngine "
                "asserts zero_optimization_stage() < 2); use zero=1 or fsdp"
            )
        if plan.active and str(self.offload_states).strip().lower() != "none":
            raise UnsupportedError("offload_states with pp is not modelled yet")

    def check_sharding(self, sharding: ShardingPlan, workload: WorkloadOptions) -> None:
        """``sharding``, the plan of these options over the world: its canonical fsdp and offload, and what it needs."""
        self.fsdp = sharding.fsdp
        self.offload_states = sharding.offload
        if sharding.offload != "none" and workload.device.lower() == "cpu":
            raise ConfigError(
                "offload_states moves model states to host memory, which is the cpu target's own memory; use a GPU target"
            )
        if (sharding.zero or sharding.fsdp != "no") and workload.task != "train":
            which = f"zero={sharding.zero}" if sharding.zero else f"fsdp={sharding.fsdp!r}"
            raise ConfigError(f"{which} would shard training state; task={workload.task!r} has none (gpus alone replicates)")
        if sharding.bucket_view and (sharding.gpus == 1 or workload.task != "train"):
            raise ConfigError("gradient_as_bucket_view shapes DDP's gradient buckets: it needs task='train' and gpus=N > 1")


ANALYSIS_OPTIONS = frozenset(f.name for f in fields(AnalysisOptions))
"""Options computed from the graph, not traced: variants of one trace may differ in these only."""
