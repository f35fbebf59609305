"""diffusers' own weight hooks on a pipeline's components: layerwise casting and group offloading.

The hooks are the library's (``ModelMixin.enable_layerwise_casting``, ``enable_group_offload``; for a component
that is not a diffusers model, ``apply_group_offloading`` as ``DiffusionPipeline.enable_group_offload`` applies
it), so the library decides which weights are cast or resident when; ``placement.py`` gives their moves the run's
meaning. Around them, hooks of diffusers' own kind name the weights a layer holds while it runs (and after) as
parameters, since the copies the hooks make are new storages.
"""

from __future__ import annotations

from typing import Any

import torch

from vramsim.config import SimulationConfig
from vramsim.config.diffusion import group_offload_layout
from vramsim.errors import UnsupportedError
from vramsim.tracer.categories import Category
from vramsim.workload.diffusion.placement import COMPUTE, HOST, Placement
from vramsim.workload.diffusion.spec import PipelineSpec
from vramsim.workload.program import StepObserver

__all__ = ["LAYERWISE_STORAGE", "WeightHooks", "apply_weight_hooks"]

LAYERWISE_STORAGE = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
"""``layerwise_casting``'s names for the storage dtypes diffusers' docs use."""


class WeightHooks:
    """What the hooks need at the call: the observer the weights are named to, the placement of their moves."""

    def __init__(self, *, layerwise_casting: str | None, group_offload: str | None, device: str) -> None:
        self.layerwise_casting = layerwise_casting
        self.group_offload = group_offload
        self.observer: StepObserver | None = None
        self.placement = Placement(device=device) if group_offload is not None else None

    def mark(self, module: torch.nn.Module) -> None:
        """``module``'s own weights, where they are now, are parameters."""
        if self.observer is not None:
            self.observer.mark([*module.parameters(recurse=False), *module.buffers(recurse=False)], Category.PARAMETER)


def apply_weight_hooks(
    spec: PipelineSpec, modules: dict[str, torch.nn.Module], config: SimulationConfig, *, device: str, dtype: torch.dtype
) -> WeightHooks | None:
    """``layerwise_casting`` on the denoisers and ``group_offload`` on every component, with diffusers' hooks."""
    if config.layerwise_casting is None and config.group_offload is None:
        return None
    if device not in ("meta", "cpu"):
        raise UnsupportedError(f"{spec.class_name}: layerwise_casting and group_offload run traced or on the CPU")
    hooks = WeightHooks(layerwise_casting=config.layerwise_casting, group_offload=config.group_offload, device=device)
    for module in modules.values():
        _named_around(module, hooks, inner=True)
    if config.layerwise_casting is not None:
        for name in spec.denoisers:
            denoiser: Any = modules[name]
            denoiser.enable_layerwise_casting(storage_dtype=LAYERWISE_STORAGE[config.layerwise_casting], compute_dtype=dtype)
    if config.group_offload is not None:
        _group_offload(modules, config.group_offload, hooks)
    for module in modules.values():
        _named_around(module, hooks, inner=False)
    return hooks


def _group_offload(modules: dict[str, torch.nn.Module], text: str, hooks: WeightHooks) -> None:
    """``pipe.enable_group_offload(onload_device, offload_device, offload_type, num_blocks_per_group)``, component by
    component as the pipeline applies it; the weights start on the host, as the hooks leave them."""
    from diffusers.hooks import apply_group_offloading

    kind, blocks = group_offload_layout(text)
    arguments: dict[str, Any] = {
        "onload_device": COMPUTE,
        "offload_device": HOST,
        "offload_type": kind,
        "num_blocks_per_group": blocks,
    }
    assert hooks.placement is not None, "group offloading places its moves"
    with hooks.placement:
        for module in modules.values():
            enable: Any = getattr(module, "enable_group_offload", None)
            if enable is not None:
                enable(**arguments)
            else:
                apply_group_offloading(module=module, **arguments)


def _named_around(root: torch.nn.Module, hooks: WeightHooks, *, inner: bool) -> None:
    """A hook on every module holding weights of its own that names them as parameters: registered before
    diffusers' hooks it runs inside them (the weights as the layer computes with them), after them outside
    (the weights as the hooks leave them)."""
    from diffusers.hooks import HookRegistry, ModelHook

    class _Named(ModelHook):  # type: ignore[misc]
        def pre_forward(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            hooks.mark(module)
            return args, kwargs

        def post_forward(self, module: torch.nn.Module, output: Any) -> Any:
            hooks.mark(module)
            return output

    name = "vramsim_weights_inner" if inner else "vramsim_weights_outer"
    for module in root.modules():
        if next(module.parameters(recurse=False), None) is not None or next(module.buffers(recurse=False), None) is not None:
            HookRegistry.check_if_exists_or_initialize(module).register_hook(_Named(), name)
