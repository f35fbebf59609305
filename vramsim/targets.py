"""A target device: what the tracer counts on it and how its kernels differ from meta execution."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vramsim.tracer import autocast_lists
from vramsim.tracer.attention import cpu_attention, cpu_attention_workspaces
from vramsim.tracer.emulation import KernelEmulation, KernelRules

from .errors import ConfigError
from .report import Assumption

__all__ = ["Target", "resolve_target"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The device a prediction is for."""

    name: str
    rules: KernelRules
    counted_devices: frozenset[str]
    """Tensor devices that land in the target's memory (meta stands for the target itself)."""
    foreach: bool
    """Whether torch.optim defaults to the foreach implementation there."""
    notes: tuple[Assumption, ...] = ()

    def emulation(self) -> KernelEmulation:
        return KernelEmulation(self.rules)


_CPU_RULES = KernelRules(
    autocast_device="cpu",
    default_autocast_dtype=torch.bfloat16,
    lower_precision_ops=autocast_lists.CPU_LOWER_PRECISION,
    fp32_ops=autocast_lists.CPU_FP32,
    promote_ops=autocast_lists.CPU_PROMOTE,
    attention=cpu_attention,
    workspaces=cpu_attention_workspaces,
)


def resolve_target(name: str) -> Target:
    """The target named ``name``: ``cpu`` or a GPU of the catalog."""
    key = name.lower()
    if key == "cpu":
        # Host tensors the program makes (e.g. Adam's step counters) live on the CPU too.
        # torch.optim picks for-loop kernels on the CPU (_default_to_fused_or_foreach).
        return Target(name="cpu", rules=_CPU_RULES, counted_devices=frozenset({"meta", "cpu"}), foreach=False)
    raise ConfigError(f"unknown device {name!r}; choose one of: cpu")
