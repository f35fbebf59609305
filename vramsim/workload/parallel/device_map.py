"""Where ``from_pretrained(device_map="auto")`` puts each module: accelerate's own placement, run on the meta model.

transformers computes a balanced ``max_memory`` (``get_balanced_memory``: the weights' bytes / GPUs plus 1.25 x
the largest no-split block or leaf, every GPU but the last capped to it) and hands it to accelerate's
``infer_auto_device_map``, which fills the GPUs in module order, keeping room on GPU 0 for the largest layer;
``sequential`` skips the balancing, ``balanced_low_0`` keeps GPU 0 as empty as it can. This module calls those
functions (transformers' balancing where it has its own, as from_pretrained does; accelerate's before that), so the
map is theirs, not a copy. With no ``max_memory`` each GPU offers what accelerate's ``get_max_memory`` reads:
its free memory once the CUDA context is up (``torch.cuda.mem_get_info``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import accelerate  # type: ignore[import-untyped]

from vramsim.errors import UnsupportedError
from vramsim.estimators.assumptions import CUDA_CONTEXT_BYTES, HIP_CONTEXT_BYTES
from vramsim.workload.targets import Target

__all__ = ["DevicePlacement", "device_placement", "free_memory"]


@dataclass(frozen=True, slots=True)
class DevicePlacement:
    """A device map and the memory each GPU was offered for it."""

    device_map: dict[str, int]
    """Module (or weight) name -> GPU index, as ``model.hf_device_map`` would read."""
    max_memory: dict[int, int]
    """What ``infer_auto_device_map`` placed against, per GPU (balanced for ``auto``)."""

    def device_of(self, module: str) -> int:
        """The GPU that runs ``module``: its own entry's or its parent's; modules above the split (the model, the
        generation loop) run on GPU 0, where accelerate's dispatch keeps the model's inputs and outputs."""
        while module not in self.device_map and module:
            module = module.rpartition(".")[0]
        return self.device_map.get(module, min(self.device_map.values()))


def free_memory(target: Target) -> int:
    """What ``torch.cuda.mem_get_info`` reports free on a fresh GPU of ``target`` once its context is up."""
    capacity = target.profile.memory_bytes
    assert capacity is not None, "the config refuses a device map on the cpu target"
    profile = target.profile
    return capacity - (HIP_CONTEXT_BYTES if profile.vendor == "amd" else CUDA_CONTEXT_BYTES[profile.architecture])


def device_placement(model: Any, strategy: str, gpus: int, max_memory: tuple[int, ...] | None, target: Target) -> DevicePlacement:
    """``from_pretrained(device_map=strategy, max_memory=...)``'s map of ``model`` (built on meta in its dtype)."""
    offered = dict(enumerate(max_memory or (free_memory(target),) * gpus))
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    with _accelerate_quiet():
        if strategy == "sequential":
            budget = dict(offered)
        else:
            budget = _balanced_memory()(
                model, max_memory=dict(offered), no_split_module_classes=no_split, low_zero=strategy == "balanced_low_0"
            )
        placed = accelerate.infer_auto_device_map(model, max_memory=dict(budget), no_split_module_classes=no_split)
    offloaded = [name for name, device in placed.items() if not isinstance(device, int)]
    if offloaded:
        raise UnsupportedError(
            f"device_map={strategy!r} over {gpus} GPUs offloads {len(offloaded)} modules ({offloaded[0]}...) to the CPU "
            "or disk: the weights do not fit the max_memory offered; offload is not modelled: give more --gpus or a "
            "larger --max-memory"
        )
    return DevicePlacement(device_map=dict(placed), max_memory={int(k): int(v) for k, v in budget.items() if isinstance(k, int)})


def _balanced_memory() -> Any:
    """The ``get_balanced_memory`` from_pretrained calls: transformers' own since 5.0, accelerate's before."""
    try:
        from transformers.integrations.accelerate import get_balanced_memory
    except ImportError:  # transformers 4 calls accelerate's
        return accelerate.utils.get_balanced_memory
    return get_balanced_memory


@contextlib.contextmanager
def _accelerate_quiet() -> Iterator[None]:
    """accelerate warns that the GPUs of ``max_memory`` 'are not available' (a meta run has none): silenced meanwhile."""
    logger = logging.getLogger("accelerate.utils.modeling")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
