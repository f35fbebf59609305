"""From a timeline and its replay to the figures of a Report."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from vramsim.analysis.device_memory import DeviceMemory
from vramsim.estimators.liveness import OVERHEAD_CATEGORY
from vramsim.estimators.timeline import Timeline
from vramsim.results.report import ComponentPeak, LayerRow, PeakSite
from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.leaves import attached_tensors, is_wrapper_subclass
from vramsim.workload.quantization.weights import logical_numel

__all__ = ["LayerSpec", "Steady", "component_peaks", "count_parameters", "layer_rows", "layer_specs", "steady_peak"]


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """A row of the per-layer table as the model defines it, before tracing."""

    module: str
    parameters: int
    parameter_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Steady:
    """The peak of the last step and what is live then."""

    peak_bytes: int
    site: PeakSite
    breakdown: dict[str, int]
    """Bytes by category at the peak, in the device's units (rounded blocks on a GPU): sums to ``peak_bytes``."""


def count_parameters(*modules: torch.nn.Module, trainable: bool = False) -> int:
    """Parameters counted once each, tied and shared ones included (``parameters()`` skips duplicates);
    a quantized weight counts the values it stands for, not its packed bytes. With ``trainable``,
    only those that get gradients (``requires_grad``), as peft's ``get_nb_trainable_parameters``
    counts them."""
    unique = {id(p): p for module in modules for p in module.parameters() if p.requires_grad or not trainable}
    return sum(logical_numel(p) for p in unique.values())


def layer_specs(modules: dict[str, torch.nn.Module]) -> list[LayerSpec]:
    """Each module down to the decoder layer, named as the trace names them (``name.path``, or
    ``path`` for the unnamed single model): containers holding a layer list are opened up, and each
    layer of a list is one row (a UNet block's own lists, a MoE layer's experts are not opened)."""
    rows: list[LayerSpec] = []

    def visit(module: torch.nn.Module, prefix: str) -> None:
        listed = isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict))
        for name, child in module.named_children():
            path = f"{prefix}{name}"
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) or (not listed and _holds_layer_list(child)):
                visit(child, f"{path}.")
            else:
                rows.append(LayerSpec(path, count_parameters(child), _weight_bytes(child)))

    for name, module in modules.items():
        visit(module, f"{name}." if name else "")
    return rows


def _weight_bytes(module: torch.nn.Module) -> int:
    """A module's weight bytes, with a quantized weight's metadata (the tensors it holds that are not
    its own data: LLM.int8's ``CB`` is); a tensor subclass that wraps others (torchao's ``Int8Tensor``)
    has no storage of its own: the tensors it holds are its bytes."""
    total = 0
    for param in {id(p): p for p in module.parameters()}.values():
        own = None if is_wrapper_subclass(param) else param.untyped_storage()
        total += 0 if own is None else param.nbytes
        total += sum(t.nbytes for _, t in attached_tensors(param) if own is None or t.untyped_storage() is not own)
    return total


def _holds_layer_list(module: torch.nn.Module) -> bool:
    """Whether a ModuleList/ModuleDict lies below; a peft adapter's own dicts (``lora_A``, ``lora_B``,
    ``lora_dropout``, ``lora_magnitude_vector``, keyed by adapter name) belong to the layer they adapt."""
    if _is_adapter_layer(module):
        return False
    return any(
        isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) or _holds_layer_list(child) for child in module.children()
    )


def _is_adapter_layer(module: torch.nn.Module) -> bool:
    """A peft tuner layer (a LoRA ``Linear`` wrapping ``base_layer``); peft is imported only if in use."""
    tuners = sys.modules.get("peft.tuners.tuners_utils")
    return tuners is not None and isinstance(module, tuners.BaseTunerLayer)


def steady_peak(timeline: Timeline, memory: DeviceMemory) -> Steady:
    """The peak of the last step, where it happened and what is live then, all at one event."""
    index = memory.peak_index
    key, _ = timeline.events[index]
    block = timeline.blocks[key]
    site = PeakSite(step=block.step, phase=block.phase, op=block.op, module=block.module)
    live = memory.live.breakdown(timeline, index)
    order = [str(c) for c in Category] + [OVERHEAD_CATEGORY]
    breakdown = {name: live[name] for name in order if live.get(name)}
    return Steady(peak_bytes=memory.peak_bytes, site=site, breakdown=breakdown)


def layer_rows(specs: list[LayerSpec], timeline: Timeline, memory: DeviceMemory) -> list[LayerRow]:
    """Saved activation bytes and own peak of each row over the last step."""
    row_of = _row_finder(tuple(spec.module for spec in specs))
    last_step = len(timeline.steps) - 1
    saved: dict[str, int] = defaultdict(int)
    for block in timeline.blocks:
        if block.step == last_step and block.category == Category.ACTIVATION and block.phase == Phase.FORWARD:
            row = row_of(block.module)
            if row is not None:
                saved[row] += block.nbytes
    peaks: dict[str, int] = defaultdict(int)
    first, last = timeline.steps[-1]
    allocated = memory.live.allocated
    for index in range(first, last + 1):
        key, is_alloc = timeline.events[index]
        if is_alloc:
            row = row_of(timeline.blocks[key].module)
            if row is not None:
                peaks[row] = max(peaks[row], allocated[index])
    return [
        LayerRow(
            module=spec.module,
            parameters=spec.parameters,
            parameter_bytes=spec.parameter_bytes,
            activation_bytes=saved[spec.module],
            peak_bytes=peaks[spec.module],
        )
        for spec in specs
    ]


def _row_finder(names: tuple[str, ...]) -> Callable[[str], str | None]:
    """Map a module path to the table row that contains it (or None), memoised."""
    rows = set(names)

    @cache
    def row_of(module: str) -> str | None:
        path = module
        while path:
            if path in rows:
                return path
            path, _, _ = path.rpartition(".")
        return None

    return row_of


def component_peaks(
    phases: dict[str, str], modules: dict[str, torch.nn.Module], timeline: Timeline, memory: DeviceMemory
) -> list[ComponentPeak]:
    """Each named module's own peak over the last step (the most allocated at one of its allocations) and its weights."""
    first, last = timeline.steps[-1]
    allocated = memory.live.allocated
    peaks: dict[str, int] = dict.fromkeys(phases, 0)
    for index in range(first, last + 1):
        key, is_alloc = timeline.events[index]
        if is_alloc:
            name = timeline.blocks[key].module.partition(".")[0]
            if name in peaks:
                peaks[name] = max(peaks[name], allocated[index])
    return [
        ComponentPeak(name=name, peak_bytes=peak, phase=phases[name], weights_bytes=_weight_bytes(modules[name]))
        for name, peak in peaks.items()
    ]
