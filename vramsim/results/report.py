"""The result of a simulation: plain data, no tensors, nothing printed (``vramsim.report_text`` words it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vramsim.estimators.checkpointing import CheckpointCost
from vramsim.results.advice import Advice
from vramsim.results.memory_history import MemoryHistory
from vramsim.results.timeline import MemoryTimeline

__all__ = [
    "Assumption",
    "CheckpointChoice",
    "ComponentPeak",
    "LayerRow",
    "PeakSite",
    "PlacedDevice",
    "RankMemory",
    "Report",
    "StageMemory",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PeakSite:
    """Where the steady-state peak happens."""

    step: int
    phase: str
    op: str
    """The aten op whose allocation reached the peak."""
    module: str
    """Innermost module active then ("" outside the model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerRow:
    """One module of the per-layer table (each module down to the decoder layer)."""

    module: str
    parameters: int
    parameter_bytes: int
    activation_bytes: int
    """Bytes its forward saved for backward in the steady-state step."""
    peak_bytes: int
    """Highest live bytes (whole device) while this module ran in the steady-state step; 0 if it never ran."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentPeak:
    """One component of a diffusion pipeline (text encoder, denoiser, VAE) and the peak while it runs."""

    name: str
    peak_bytes: int
    """Highest allocated bytes (whole device) while this component ran in the steady-state call."""
    phase: str
    """The pipeline phase it runs in: ``encode_prompt``, ``denoise`` or ``decode`` (``encode_image, decode`` for a VAE
    that also encodes a reference image)."""
    weights_bytes: int
    """Its parameters' bytes, a tied weight (T5's ``shared`` and ``embed_tokens``) once."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointChoice:
    """One activation-checkpointing choice, computed from the same trace as the others."""

    checkpointing: str
    peak_bytes: int
    reserved_bytes: int
    device_bytes: int
    fits: bool | None
    cost: CheckpointCost
    """Recompute and host traffic per step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Assumption:
    """A figure or policy the prediction rests on that the trace cannot know."""

    name: str
    detail: str
    bytes: int = 0
    """Bytes it adds, where it adds any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankMemory:
    """What one rank holds besides the peak figures (data parallel ``estimators/sharding/shard.py``, tensor and
    pipeline parallel)."""

    scheme: str
    """``DDP``, ``ZeRO-1`` .. ``ZeRO-3``, ``FSDP2 full``, ``FSDP2 grad-op``."""
    gpus: int
    ranks_alike: bool
    """True: every rank holds what this one does (pure data parallelism), so one rank's figures are all of them."""
    model_state: dict[str, int]
    """Weights as held (sharded, not gathered), one step's gradients and optimizer states, as allocated."""
    gathered_elements: int
    """Most weight elements gathered at once (ZeRO-3/FSDP: the current block, the prefetched part, the root)."""
    buffers: dict[str, int]
    """Communication buffers by kind (one buffer's bytes); NCCL's own are in ``assumptions``."""
    tp: int = 1
    """Tensor-parallel ranks: the figures are one rank's slice (``vramsim/workload/parallel/tensor.py``)."""
    cp: int = 1
    """Context-parallel ranks: the figures are one rank's, running seq_len / cp tokens (``estimators/context_parallel.py``)."""
    ep: int = 1
    """Expert-parallel ranks: the figures are one rank's, holding num_experts / ep experts
    (``vramsim/workload/parallel/expert.py``)."""
    pp: int = 1
    """Pipeline stages: the figures are the busiest stage's (``stages`` lists each)."""
    stages: list[StageMemory] = field(default_factory=list)
    busiest_stage: int | None = None
    """The pipeline rank with the most device memory, whose figures the report gives."""
    host: dict[str, int] = field(default_factory=dict)
    """Bytes kept in host memory under CPU offload, by kind; not device memory and not in any device figure."""
    devices: list[PlacedDevice] = field(default_factory=list)
    """With a device map: every GPU; the report's figures are the busiest one's (``busiest_device``)."""
    busiest_device: int | None = None
    """The GPU with the most device memory under a device map."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedDevice:
    """One GPU of an inference model placed by a device map (``vramsim/analysis/placement.py``)."""

    device: int
    modules: list[str]
    """The device map's entries placed on it, in the model's order."""
    max_memory_bytes: int
    """What accelerate's ``infer_auto_device_map`` could place on it (balanced for ``auto``)."""
    parameter_bytes: int
    """The weights and buffers it holds, as allocated."""
    kv_cache_bytes: int
    """Its layers' KV cache at its peak, counted as the peak is (layer i's cache is on layer i's GPU)."""
    peak_bytes: int
    device_bytes: int
    fits: bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StageMemory:
    """One pipeline rank (``estimators/pipeline_parallel.py``)."""

    rank: int
    layers: list[str]
    """The decoder layers it runs (the embedding is rank 0's, head and loss the last rank's)."""
    held_bytes: int
    """Activations it holds per micro-batch between a forward and its backward."""
    in_flight: float
    """Micro-batches' worth of those it holds at its busiest backward under the schedule (GPipe's second: one
    fewer than its first, beside the first's gradients)."""
    model_state: dict[str, int]
    """Its weights, optimizer states and one step's gradients, as allocated."""
    peak_bytes: int
    device_bytes: int
    fits: bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatorPressure:
    """The replay again within the memory the job may use, where the unlimited one reserves more:
    PyTorch's caching allocator empties its cache and retries a ``cudaMalloc`` that fails before
    it raises out-of-memory (``DeviceCachingAllocator::malloc``), so reserving more than fits is
    not yet an OOM."""

    limit_bytes: int
    """What the allocator may reserve: the usable memory less what the device holds outside it."""
    retries: int
    """Times the cache was emptied to retry (``num_alloc_retries``), each a device-wide synchronisation;
    0 where the blocks in use alone pass the limit (nothing is replayed: no cache can help)."""
    oom_at: str | None
    """Where an allocation still failed (the op, its module and phase, or the model's loading): an
    out-of-memory error; ``None`` if the job runs."""
    unlimited_reserved_bytes: int
    """``max_memory_reserved`` of the replay without a limit (an allocator never made to give back its
    cache), reserved overheads included: what made this replay necessary."""
    unlimited_device_bytes: int
    """The device figure of the replay without a limit; above the usable memory."""
    reserved_bytes: int | None = None
    """The allocator's own reserved peak over the last step within ``limit_bytes`` (allocated overheads
    included, reserved-only ones not); ``None`` where it runs out of memory. The report's
    ``reserved_bytes`` and ``device_bytes`` come from it where it runs."""
    expandable_retries: int | None = None
    """With ``expandable_segments:True`` instead, where it was not set: its retries, or ``None`` if it OOMs too."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """A simulated run's memory, per device (one rank; with data parallelism, the rank ``ranks`` names)."""

    model: str
    target: str
    task: str
    config_of: str | None = None
    """The bundled id whose config.json was built where ``model`` names another repository of the same
    architecture (an instruct fine-tune, a base/instruct twin: ``model_zoo.SAME_ARCHITECTURE``); else None."""
    peak_bytes: int
    """Steady-state peak of allocated bytes over the last step (``max_memory_allocated``): on a GPU
    each tensor counts its caching-allocator block (rounded up), plus allocated overheads."""
    reserved_bytes: int
    """``max_memory_reserved``: what the caching allocator holds at its peak (= peak_bytes on the cpu); under
    allocator pressure that runs, the replay within the usable memory's (``allocator_pressure`` keeps the
    unlimited one's)."""
    device_bytes: int
    """What nvidia-smi would show: reserved plus CUDA/ROCm context and communication buffers, plus ``paged_bytes``."""
    capacity_bytes: int | None
    """The target's memory; ``None`` for the cpu."""
    fits: bool | None
    """Whether ``device_bytes`` less ``paged_bytes`` is within the capacity less the headroom (the driver pages
    managed memory out rather than fail); ``None`` for the cpu."""
    headroom: float
    advice: list[Advice]
    """What to change first when it does not fit: the what-ifs over this trace, least device memory first, then
    (``advice="traced"``) the changes measured by further traces."""
    peak_at: PeakSite
    breakdown: dict[str, int]
    """Bytes by category at the moment of ``peak_bytes``, counted as ``peak_bytes`` counts them: sums to it."""
    paged_bytes: int = 0
    """Paged optimizer states (bitsandbytes', CUDA managed memory) assumed resident on the device: outside the
    caching allocator, so in neither ``peak_bytes`` nor ``reserved_bytes``; counted in ``device_bytes``."""
    parameters: int
    """Parameter count (tied weights once): under tensor or expert parallel one rank's share, the model one
    rank builds (``model_parameters`` is the whole model's)."""
    model_parameters: int | None = None
    """Under tensor or expert parallel, the whole model's parameter count (its unsharded config built on
    meta, tied weights once, no adapters); ``None`` where ``parameters`` is already the whole model's."""
    trainable_parameters: int | None = None
    """Parameters that get gradients and optimizer states (``requires_grad``: with LoRA the adapters and
    ``modules_to_save`` copies), tied ones once; ``None`` unless training."""
    layers: list[LayerRow]
    checkpointing: list[CheckpointChoice] = field(default_factory=list)
    """With ``checkpointing="all"``: every choice's figures, from this one trace; with ``"auto"``: the plan it chose."""
    ranks: RankMemory | None = None
    """With ``gpus`` > 1, ``zero`` or ``fsdp``: the rank the figures above describe."""
    assumptions: list[Assumption] = field(default_factory=list)
    components: list[ComponentPeak] = field(default_factory=list)
    """A diffusion pipeline's components, each with its own peak; the largest sets ``peak_bytes``."""
    settings: dict[str, str] = field(default_factory=dict)
    """The choices in force (weights' dtype and where it came from, autocast, optimizer, LoRA...)."""
    warnings: list[str] = field(default_factory=list)
    """What the real run may do differently, or options that changed nothing here: each one line."""
    options: dict[str, Any] = field(default_factory=dict)
    trace_seconds: float = 0.0
    allocator_pressure: AllocatorPressure | None = None
    """Where ``device_bytes`` passes the usable memory: the replay within it (OOM, or cache flushes)."""
    timeline: MemoryTimeline | None = None
    """The steady-state step's memory over time, sampled (``vramsim/analysis/timeline.py``); ``simulate`` sets it."""
    memory_history: MemoryHistory | None = None
    """With ``memory_history=True``: the caching allocator's history over the replay the figures come from."""

    def to_dict(self, *, timeline: bool = False) -> dict[str, Any]:
        """JSON-ready data; ``--json`` prints exactly this (``--timeline``: with ``timeline``, else without the key)."""
        data = asdict(replace(self, timeline=None))
        del data["timeline"]
        if timeline and self.timeline is not None:
            data["timeline"] = asdict(self.timeline)
        return data

    def __repr__(self) -> str:
        return f"<Report peak={self.peak_bytes / 2**30:.2f} GiB target={self.target}>"
