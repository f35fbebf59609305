"""Which GPU do I need: every catalog GPU judged on one traced program, smallest first.

The job is traced once, for the default device (``h100``: its kernel choices and workspaces), and that one graph is
replayed on each GPU of the catalog with the GPU's own overheads (CUDA or HIP context, BLAS workspaces, NCCL's
buffers) and allocator, then judged against its usable memory (capacity less headroom). Devices whose overheads
and allocator are alike replay alike, so each such group is replayed once (and again per GPU where the replay
passes the usable memory: the replay within it, as ``trace`` judges, depends on the GPU's size). A GPU whose
kernels differ from the traced one's (another compute capability or vendor) is marked so: its figure rests on the
traced kernels.

When no GPU of the catalog holds the job, the same trace answers what does: FSDP2 full over more GPUs, and model
states offloaded to the host, each a what-if of the graph on the traced device.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from vramsim.analysis import generation
from vramsim.analysis.device_memory import DeviceMemory
from vramsim.analysis.traced import trace_workload
from vramsim.analysis.whatifs import Analysis
from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.assumptions import overheads_for, totals
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.estimators.devices import DEVICES, DeviceProfile
from vramsim.results.advice import Advice
from vramsim.results.device_fit import DeviceFit, DeviceVerdict
from vramsim.workload.attention import check_attention
from vramsim.workload.models import ModelSource, model_name, with_model_defaults
from vramsim.workload.optimizers import check_target
from vramsim.workload.parallel.expert import routed_rows
from vramsim.workload.targets import Target, resolve_target

__all__ = ["ANY_DEVICE", "MOST_GPUS", "device_fit"]

MOST_GPUS = 1024
"""The most GPUs the advice tries FSDP2 full on (powers of two): a search limit, as ``MAX_TRACES`` is the size
search's; past it the advice says the job does not fit there either."""

ANY_DEVICE = "any"
"""The ``device`` that asks which catalog GPUs hold the job."""


def device_fit(
    model: ModelSource, *, progress: Callable[[str], None] | None = None, cache: bool | ResultCache = True, **options: Any
) -> DeviceFit:
    """Every catalog GPU judged on one trace of the job (``options`` are ``simulate``'s, ``device`` left out);
    ``cache`` as ``simulate`` takes it.

    >>> found = device_fit("gpt2", seq_len=256)
    >>> found.smallest[0].fits
    True
    """
    options = with_model_defaults(model, {k: v for k, v in options.items() if k != "device"})
    return cached_answer(
        cache, DeviceFit, lambda: request_key("device_fit", model, options), lambda: _judged(model, progress, options)
    )


def _judged(model: ModelSource, progress: Callable[[str], None] | None, options: dict[str, Any]) -> DeviceFit:
    """``device_fit``'s answer: one trace, every GPU judged on it."""
    config = SimulationConfig.from_options(**options)
    if config.checkpointing == "all":
        raise ConfigError("checkpointing='all' compares choices; which GPU holds the job is judged for one choice")
    traced_on = resolve_target(config.device)
    started = time.perf_counter()
    if progress is not None:
        progress(f"tracing {model_name(model)} once, for {traced_on.name}")
    traced = trace_workload(model, config, traced_on, derive=generation.derives(config))
    timeline = None if traced.derived is None else traced.derived.timeline
    routed = routed_rows(traced.program.model, config) if config.ep > 1 else None

    def analysis(target: Target, variant: SimulationConfig) -> Analysis:
        return Analysis(traced.graph, target, variant, timeline=timeline, routed=routed)

    plan = parse_checkpointing(config.checkpointing)
    verdicts, refused = [], {}
    replayed: dict[tuple[Any, ...], DeviceMemory] = {}
    gpus = sorted((p for p in DEVICES.values() if p.vendor != "cpu"), key=lambda p: (p.memory_bytes or 0, p.name))
    for profile in gpus:
        try:
            check_attention(config.attn_implementation, profile)
            check_target(config.optimizer, profile.vendor)
        except (ConfigError, UnsupportedError) as exc:
            refused[profile.name] = str(exc)
            continue
        alike = _replay_key(profile, config)
        known, judged = replayed.get(alike), analysis(resolve_target(profile.name), config)
        # auto's plan, and a replay within the usable memory (the allocator emptying its cache), depend on the size
        if plan.kind == "auto" or known is None or known.pressure is not None:
            if progress is not None:
                progress(f"replaying the trace on {profile.name}")
            known = replayed[alike] = judged.run(plan).memory
        verdicts.append(
            DeviceVerdict(
                device=profile.name,
                usable_bytes=int((profile.memory_bytes or 0) * (1 - config.headroom)),
                device_bytes=known.device_bytes,
                fits=bool(judged.fits(known)),  # trace's verdict on this device
                kernels_traced=_kernels(profile) == _kernels(traced_on.profile),
            )
        )
    usable = int((traced_on.profile.memory_bytes or 0) * (1 - config.headroom))
    fits = any(v.fits for v in verdicts)
    advice = [] if fits else _advice(lambda variant: analysis(traced_on, variant).run(plan).memory.device_bytes, options, usable)
    return DeviceFit(
        model=model_name(model),
        traced_on=traced_on.name,
        headroom=config.headroom,
        devices=verdicts,
        refused=refused,
        advice=advice,
        trace_seconds=round(time.perf_counter() - started, 3),
    )


def _replay_key(profile: DeviceProfile, config: SimulationConfig) -> tuple[Any, ...]:
    """What a replay reads of the device: its overheads and its allocator (CUDA or ROCm)."""
    overheads = overheads_for(
        profile, world_size=config.gpus, training=config.task == "train", module_loading=config.cuda_module_loading
    )
    return profile.vendor, totals(overheads)


def _kernels(profile: DeviceProfile) -> tuple[Any, ...]:
    """What the traced kernels depend on: the vendor and its compute capability or ISA."""
    return profile.vendor, profile.compute_capability, profile.gfx_arch


def _advice(measure: Callable[[SimulationConfig], int], options: dict[str, Any], usable: int) -> list[Advice]:
    """On the traced device (``measure``: a variant's device bytes there, ``usable`` its usable memory): the fewest
    GPUs (a power of two) FSDP2 full fits on, and the model states offloaded to the host (ZeRO-3 where no sharding
    was asked for); each a what-if of the one trace."""
    asked = SimulationConfig.from_options(**options)
    base = measure(asked)

    def advice(changes: dict[str, Any]) -> Advice:
        nbytes = measure(SimulationConfig.from_options(**{**options, **changes}))
        return Advice(changes=changes, device_bytes=nbytes, saved_bytes=base - nbytes, fits=nbytes <= usable, traced=False)

    found = []
    if asked.gpus == 1 and asked.zero == 0 and asked.fsdp == "no":
        for gpus in (1 << i for i in range(1, MOST_GPUS.bit_length())):
            more = advice({"gpus": gpus, "fsdp": "full"})
            if more.fits or gpus == MOST_GPUS:
                found.append(more)
                break
    if asked.offload_states == "none" and asked.task == "train" and asked.pp == 1:
        sharded = {} if asked.zero or asked.fsdp != "no" else {"zero": 3}
        with contextlib.suppress(ConfigError, UnsupportedError):  # the run's parallelism has no offload modelled
            found.append(advice({"offload_states": "params", **sharded}))
    return found
