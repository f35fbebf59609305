"""The model-parallel ranks the traced program is split over (tensor, expert, context), the world size
they make with the data-parallel and pipeline ranks, and an inference model's device map over the GPUs."""

from __future__ import annotations

from dataclasses import dataclass, field

from vramsim.config.analysis import AnalysisOptions
from vramsim.config.checks import check_count
from vramsim.config.memory import parse_max_memory
from vramsim.config.options import as_is, option
from vramsim.config.workload import WorkloadOptions
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.sharding import MAX_GPUS

__all__ = ["DEVICE_MAPS", "ParallelOptions"]

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
"""``from_pretrained(device_map=...)``'s strings: ``auto`` and ``balanced`` balance the weights over the GPUs,
``balanced_low_0`` keeps GPU 0 as empty as it can, ``sequential`` fills each GPU in turn."""

_INFERENCE_LAYOUTS = (
    "--device-map auto (the layers split in order over the GPUs, as from_pretrained(device_map='auto') does) "
    "or --tp N (tensor parallel)"
)


@dataclass(kw_only=True)
class ParallelOptions:
    """Ranks that change what one rank traces; ``dp`` names the world size by its data-parallel ranks."""

    dp: int | None = field(
        default=None,
        metadata=option(
            help="data-parallel ranks instead of --gpus: gpus = dp x tp x pp (the context- and expert-parallel ranks are "
            "among the dp ranks, as torchtitan borrows them from its data-parallel mesh)",
            parse=int,
            report=as_is,
            commands=("trace",),
        ),
    )
    tp: int = field(
        default=1,
        metadata=option(
            help="tensor-parallel ranks: Megatron's split of attention, MLP, embedding and loss "
            "(vramsim/workload/parallel/tensor.py)",
            parse=int,
            report=as_is,
        ),
    )
    ep: int = field(
        default=1,
        metadata=option(
            help="expert-parallel ranks for MoE decoders (Mixtral, Qwen-MoE), taken from the data-parallel ranks: each "
            "holds num_experts / ep experts, routed tokens go to their experts' rank by all-to-all, balanced routing; "
            "--zero/--fsdp shard the experts over gpus / (tp x pp x ep) ranks (vramsim/workload/parallel/expert.py)",
            parse=int,
            report=as_is,
        ),
    )
    cp: int = field(
        default=1,
        metadata=option(
            help="context-parallel ranks: each runs seq_len / cp tokens and passes K/V round a ring in each SDPA call (torch's "
            "context_parallel, estimators/context_parallel.py)",
            parse=int,
            report=as_is,
            commands=("trace",),
        ),
    )

    device_map: str | None = field(
        default=None,
        metadata=option(
            help="inference over --gpus GPUs as from_pretrained(device_map=...) places it: auto, balanced, "
            "balanced_low_0 or sequential (accelerate's infer_auto_device_map on the meta model); each GPU holds "
            "its modules' weights, KV cache and activations; none given with --gpus N on forward or generate: auto",
            report=as_is,
            commands=("trace",),
        ),
    )
    max_memory: str | int | tuple[int, ...] | None = field(
        default=None,
        metadata=option(
            help="--device-map: what each GPU may hold, as from_pretrained(max_memory=...): one size for every GPU "
            "(20GiB, 24GB) or one per GPU (20GiB,30GiB); none given: each GPU's free memory once its CUDA context "
            "is up, as accelerate's get_max_memory reads it",
            report=as_is,
            commands=("trace",),
        ),
    )

    def check_parallelism(self, workload: WorkloadOptions, analysis: AnalysisOptions) -> None:
        """``gpus`` = dp x tp x pp, as many as the model-parallel ranks need unless given (``analysis.gpus`` set here)."""
        for name in ("tp", "ep", "cp"):
            check_count(name, getattr(self, name), MAX_GPUS)
        self._check_inference_layout(workload, analysis)
        tp, pp = self.tp, analysis.pp
        if self.dp is not None:
            check_count("dp", self.dp, MAX_GPUS)
            world = self.dp * tp * pp
            if analysis.gpus not in (1, world):
                raise ConfigError(
                    f"dp={self.dp} x tp={tp} x pp={pp} is {world} GPUs, not gpus={analysis.gpus}: give --dp or --gpus"
                )
            analysis.gpus = world
        if analysis.gpus == 1:  # the default: as many GPUs as the model-parallel ranks need
            analysis.gpus = tp * pp * self.ep * self.cp
        self._check_expert_parallel(workload, analysis)
        self._check_context_parallel(workload, analysis)
        if analysis.gpus % (tp * pp):
            raise ConfigError(f"gpus={analysis.gpus} is dp x tp x pp; it must be a multiple of tp x pp = {tp * pp}")

    def _check_inference_layout(self, workload: WorkloadOptions, analysis: AnalysisOptions) -> None:
        """Inference over several GPUs is one model split over them (a device map, or tensor parallel), never DDP
        replicas, which exist to reduce gradients; ``--gpus N`` alone gets ``device_map='auto'``."""
        if workload.task == "train":
            if self.device_map is not None or self.max_memory is not None:
                raise ConfigError(
                    "device_map places an inference model (forward, generate); training over GPUs is --gpus "
                    "(DDP), --zero, --fsdp, --tp or --pp"
                )
            return
        if self.dp is not None and self.dp > 1:
            raise ConfigError(
                f"dp={self.dp} would be DDP replicas, which reduce gradients; task={workload.task!r} has none: "
                f"give {_INFERENCE_LAYOUTS}"
            )
        sharded = analysis.zero or str(analysis.fsdp).strip().lower() not in ("no", "none", "false")
        if self.device_map is None and analysis.gpus > 1 and self.tp == 1 and not sharded:
            self.device_map = "auto"  # what from_pretrained(device_map="auto") users run on several GPUs
        if self.max_memory is not None and self.device_map is None:
            raise ConfigError("max_memory caps what --device-map places on each GPU; give --device-map auto")
        if self.device_map is None:
            if self.tp > 1 and analysis.gpus not in (1, self.tp):
                raise ConfigError(
                    f"gpus={analysis.gpus} with tp={self.tp} would be {analysis.gpus // self.tp} DDP replicas, which "
                    f"reduce gradients; task={workload.task!r} has none: give gpus={self.tp}, or --device-map auto"
                )
            return
        if self.device_map not in DEVICE_MAPS:
            raise ConfigError(f"unknown device_map {self.device_map!r}; choose one of: {', '.join(DEVICE_MAPS)}")
        if self.tp > 1 or self.ep > 1 or self.cp > 1:
            raise UnsupportedError("device_map with tp, ep or cp is not modelled; give one layout")
        if analysis.gpus == 1:
            raise ConfigError("device_map over one GPU puts the whole model on it, as a plain run does: give --gpus N")
        if workload.device.strip().lower() == "cpu":
            raise ConfigError("device_map places the model over GPUs; the cpu target is one device: name a GPU (--device)")
        try:
            self.max_memory = parse_max_memory(self.max_memory, analysis.gpus)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _check_context_parallel(self, workload: WorkloadOptions, analysis: AnalysisOptions) -> None:
        """``cp``: the sequence split round-robin in two chunks per rank (causal load balance); the cp ranks are
        data-parallel ranks for the weights (torchtitan shards them over dp x cp), so gpus is a multiple of tp x pp x cp."""
        if self.cp == 1:
            return
        if workload.task != "train":
            raise UnsupportedError(f"cp is modelled for training; task={workload.task!r} is not")
        if workload.seq_len % (2 * self.cp):
            raise ConfigError(
                f"cp={self.cp} splits the sequence into 2 x cp chunks (load-balanced causal ring); seq_len "
                f"{workload.seq_len} is not a multiple of {2 * self.cp}"
            )
        if self.ep > 1 or workload.inputs is not None:
            raise UnsupportedError("cp with ep or custom inputs is not modelled yet")
        ranks = self.tp * analysis.pp * self.cp
        if analysis.gpus % ranks:
            raise ConfigError(f"gpus={analysis.gpus} must be a multiple of tp x pp x cp = {ranks}")

    def _check_expert_parallel(self, workload: WorkloadOptions, analysis: AnalysisOptions) -> None:
        """``ep``: expert-parallel ranks among the data-parallel ranks of a training step (torchtitan's EP within
        dp_shard, DeepSpeed-MoE's expert-data-parallel groups), under balanced routing."""
        if self.ep == 1:
            return
        if workload.task != "train":
            raise UnsupportedError(
                f"ep is modelled for training; task={workload.task!r} is not (--tp N splits each expert for inference)"
            )
        if self.tp > 1:
            raise UnsupportedError("ep with tp is not modelled yet (tp alone splits each expert, ep alone the experts)")
        ranks = self.tp * analysis.pp * self.ep
        if analysis.gpus % ranks:
            raise ConfigError(
                f"ep={self.ep} borrows expert-parallel ranks from the data-parallel ones: gpus={analysis.gpus} "
                f"must be a multiple of tp x pp x ep = {ranks}"
            )
        if workload.moe_routing != "balanced":
            raise UnsupportedError(
                f"ep is modelled under balanced routing (each rank receives as many routed rows as it "
                f"sends); moe_routing={workload.moe_routing!r} with ep is not"
            )
