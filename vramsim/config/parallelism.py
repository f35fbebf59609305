"""The model-parallel ranks the traced program is split over (tensor, expert, context), and the world size
they make with the data-parallel and pipeline ranks."""

from __future__ import annotations

from dataclasses import dataclass, field

from vramsim.config.analysis import AnalysisOptions
from vramsim.config.checks import check_count
from vramsim.config.options import as_is, option
from vramsim.config.workload import WorkloadOptions
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.sharding import MAX_GPUS

__all__ = ["ParallelOptions"]


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

    def check_parallelism(self, workload: WorkloadOptions, analysis: AnalysisOptions) -> None:
        """``gpus`` = dp x tp x pp, as many as the model-parallel ranks need unless given (``analysis.gpus`` set here)."""
        for name in ("tp", "ep", "cp"):
            check_count(name, getattr(self, name), MAX_GPUS)
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
            raise UnsupportedError(f"ep is modelled for training; task={workload.task!r} is not")
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
