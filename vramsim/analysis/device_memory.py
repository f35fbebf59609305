"""From a timeline to what the device would show: allocator rounding, cache, overheads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vramsim.estimators.allocator import AllocatorConfig, CachingAllocator
from vramsim.estimators.assumptions import ModuleLoading, Overhead, overheads_for, totals
from vramsim.estimators.devices import DeviceProfile
from vramsim.estimators.liveness import Liveness, backward_starts, liveness, replay_under_limit
from vramsim.estimators.timeline import Timeline
from vramsim.results.report import AllocatorPressure

__all__ = ["DeviceMemory", "MemoryFigures", "TimelineReplay", "allocator_replay", "cache_releases", "device_memory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMemory:
    """The three counters a user sees on the device over the steady-state (last) step, and the
    replay they come from."""

    live: Liveness
    peak_bytes: int
    """``max_memory_allocated()``: the highest ``live.allocated`` over the last step."""
    peak_index: int
    """The event at which it is reached: the moment the breakdown and the peak site describe."""
    reserved_bytes: int
    """``max_memory_reserved()``: segments the caching allocator holds, plus reserved overheads; where the
    replay within ``usable_bytes`` runs (``pressure``), that replay's."""
    device_bytes: int
    """What nvidia-smi would show: reserved plus context and communication buffers (as ``reserved_bytes``,
    the replay within the usable memory's where it runs)."""
    overheads: list[Overhead]
    pressure: AllocatorPressure | None = None
    """The replay within ``usable_bytes`` where the unlimited one's device figure exceeds it; ``None`` otherwise."""
    managed_bytes: int = 0
    """CUDA managed memory assumed resident on the device (bitsandbytes' paged optimizer states), outside the
    allocator: in ``device_bytes``, not in ``peak_bytes`` or ``reserved_bytes``; the driver may page it out."""

    @property
    def unlimited_device_bytes(self) -> int:
        """The device figure of the replay without a limit: what a search that does not count on the
        allocator emptying its cache compares with the usable memory."""
        return self.device_bytes if self.pressure is None else self.pressure.unlimited_device_bytes


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """A replay's figures without the counters' history they come from: what a sweep's row needs of it."""

    peak_bytes: int
    reserved_bytes: int
    device_bytes: int
    managed_bytes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineReplay:
    """``device_memory``'s arguments but the blocks' bytes: one timeline's replay on a device, as plain data that
    pickles, so that the points of a sweep that share the timeline replay it with their own bytes in other
    processes (``vramsim/search/sweep_answers.py``) exactly as here."""

    timeline: Timeline
    profile: DeviceProfile
    training: bool
    expandable_segments: bool = False
    world_size: int = 1
    usable_bytes: int | None = None
    empty_cache_steps: int | None = None
    module_loading: ModuleLoading = "lazy"
    managed_bytes: int = 0

    def memory(self, nbytes: list[int] | None = None) -> DeviceMemory:
        """The device memory of the timeline, its blocks ``nbytes`` in place of their own where given."""
        return device_memory(
            self.timeline,
            self.profile,
            training=self.training,
            expandable_segments=self.expandable_segments,
            world_size=self.world_size,
            usable_bytes=self.usable_bytes,
            empty_cache_steps=self.empty_cache_steps,
            module_loading=self.module_loading,
            managed_bytes=self.managed_bytes,
            nbytes=nbytes,
        )

    def figures(self, nbytes: list[int] | None = None) -> MemoryFigures:
        """``memory``'s figures alone (small to send back from a process)."""
        memory = self.memory(nbytes)
        return MemoryFigures(memory.peak_bytes, memory.reserved_bytes, memory.device_bytes, memory.managed_bytes)


def device_memory(
    timeline: Timeline,
    profile: DeviceProfile,
    *,
    training: bool,
    expandable_segments: bool = False,
    world_size: int = 1,
    usable_bytes: int | None = None,
    empty_cache_steps: int | None = None,
    module_loading: ModuleLoading = "lazy",
    managed_bytes: int = 0,
    nbytes: list[int] | None = None,
) -> DeviceMemory:
    """Replay ``timeline`` on the device of ``profile``: through the caching allocator on a GPU, as is on the CPU
    (no caching allocator and no context to add: all three counters are the peak). ``world_size``
    > 1 adds NCCL's buffers. Where the device figure passes ``usable_bytes``, the timeline is
    replayed again within it (``AllocatorPressure``), and where that replay runs its reserved and device
    figures are the ones a real run would show (an allocator never reserves past the card: it empties
    its cache first), the unlimited ones kept apart in the pressure record. ``empty_cache_steps`` N: the HF Trainer's
    ``torch_empty_cache_steps``, the cache emptied before backward in the steps whose index (the
    Trainer's ``global_step``, 0 for the first traced step) is a multiple of N. ``managed_bytes``: managed memory
    resident on the device besides the timeline (which holds none of it), added to the device figure only; the
    driver pages it out before the allocator runs short, so the limited replay leaves it out. ``nbytes``: each
    block's bytes, in place of the blocks' own (``liveness``)."""
    first, last = timeline.steps[-1]
    if profile.vendor == "cpu":
        live = liveness(timeline, nbytes=nbytes)
        peak, index = live.peak(first, last)
        return DeviceMemory(live=live, peak_bytes=peak, peak_index=index, reserved_bytes=peak, device_bytes=peak, overheads=[])
    overheads = overheads_for(profile, world_size=world_size, training=training, module_loading=module_loading)
    added = totals(overheads)
    platform: Literal["cuda", "rocm"] = "rocm" if profile.vendor == "amd" else "cuda"
    releases = cache_releases(timeline, empty_cache_steps)
    _, live = allocator_replay(timeline, profile, expandable_segments, empty_cache_steps, added.allocated, nbytes=nbytes)
    peak, index = live.peak(first, last)
    reserved = live.peak_reserved_bytes + (added.reserved - added.allocated)
    device = reserved + (added.device - added.reserved)
    pressure = None
    if usable_bytes is not None and device > usable_bytes:
        limit = usable_bytes - (added.device - added.allocated)
        pressure = _pressure(
            timeline, live, limit, platform, expandable_segments, added.allocated, releases, (reserved, device), nbytes
        )
        if pressure.oom_at is None and pressure.reserved_bytes is not None:
            reserved = pressure.reserved_bytes + (added.reserved - added.allocated)
            device = reserved + (added.device - added.reserved)
    return DeviceMemory(
        live=live,
        peak_bytes=peak,
        peak_index=index,
        reserved_bytes=reserved,
        device_bytes=device + managed_bytes,
        overheads=overheads,
        pressure=pressure,
        managed_bytes=managed_bytes,
    )


def allocator_replay(
    timeline: Timeline,
    profile: DeviceProfile,
    expandable_segments: bool,
    empty_cache_steps: int | None,
    overhead_bytes: int,
    *,
    record: bool = False,
    nbytes: list[int] | None = None,
) -> tuple[CachingAllocator, Liveness]:
    """``timeline`` through the caching allocator of a GPU (``profile``), without a limit: the replay the figures
    come from (``record``: keeping the allocator's history, ``vramsim/analysis/memory_history.py``; ``nbytes``:
    as ``liveness`` takes it)."""
    platform: Literal["cuda", "rocm"] = "rocm" if profile.vendor == "amd" else "cuda"
    allocator = CachingAllocator(AllocatorConfig(platform=platform, expandable_segments=expandable_segments), record=record)
    releases = cache_releases(timeline, empty_cache_steps)
    return allocator, liveness(timeline, allocator, overhead_bytes=overhead_bytes, cache_releases=releases, nbytes=nbytes)


def cache_releases(timeline: Timeline, empty_cache_steps: int | None) -> frozenset[int]:
    """The events before which the HF Trainer's ``torch_empty_cache_steps`` N empties the cache."""
    return backward_starts(timeline, lambda step: step % empty_cache_steps == 0) if empty_cache_steps else frozenset()


def _pressure(
    timeline: Timeline,
    live: Liveness,
    limit: int,
    platform: Literal["cuda", "rocm"],
    expandable_segments: bool,
    overhead_bytes: int,
    releases: frozenset[int],
    unlimited: tuple[int, int],
    nbytes: list[int] | None,
) -> AllocatorPressure:
    """The timeline replayed within ``limit`` allocated bytes: the allocator's retries, its reserved peak
    over the last step, where it runs out, and, without expandable segments, the retries it would make
    with them. ``unlimited``: the reserved and device figures of the replay without a limit."""

    def replay(expandable: bool) -> tuple[int, int, str | None]:
        limited = CachingAllocator(
            AllocatorConfig(platform=platform, expandable_segments=expandable, memory_limit_bytes=max(limit, 1))
        )
        failed = replay_under_limit(timeline, limited, overhead_bytes=overhead_bytes, cache_releases=releases, nbytes=nbytes)
        stats = limited.stats()
        return stats.alloc_retries, stats.peak_reserved_bytes, None if failed is None else _failing(timeline, failed)

    reserved, device = unlimited
    beyond = next((i for i, allocated in enumerate(live.allocated) if allocated > limit), None)
    if beyond is not None:  # the blocks in use alone pass the limit: no cache to give back, no replay needed
        return AllocatorPressure(
            limit_bytes=limit,
            retries=0,
            oom_at=_failing(timeline, beyond),
            unlimited_reserved_bytes=reserved,
            unlimited_device_bytes=device,
        )
    retries, limited_reserved, oom_at = replay(expandable_segments)
    alternative = None
    if not expandable_segments and (retries or oom_at):
        expandable_retries, _, expandable_oom = replay(True)
        alternative = None if expandable_oom else expandable_retries
    return AllocatorPressure(
        limit_bytes=limit,
        retries=retries,
        oom_at=oom_at,
        reserved_bytes=None if oom_at else limited_reserved,
        unlimited_reserved_bytes=reserved,
        unlimited_device_bytes=device,
        expandable_retries=alternative,
    )


def _failing(timeline: Timeline, event: int) -> str:
    """Where the allocation that cannot be served happens: the op, its module and phase, or the model's
    loading (what exists before the step: weights, buffers, inputs)."""
    if event < timeline.preexisting:
        return "loading the model (weights, buffers and inputs before the step)"
    block = timeline.blocks[timeline.events[event][0]]
    return f"{block.op} in {block.module} ({block.phase})" if block.module else f"{block.op} ({block.phase})"
