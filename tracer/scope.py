"""Which module and phase the program is in, for attributing each allocation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.distributed._tools import mod_tracker
from torch.distributed._tools.mod_tracker import ModTracker

from .categories import Phase

__all__ = ["ModuleScope"]


class ModuleScope:
    """Answers two questions for the tracer: the innermost active module, and the phase.

    Module context comes from torch's ``ModTracker`` (forward hooks, and multi-grad hooks in
    backward); the step phase is set by the workload, since only it knows whether it is in
    ``backward()`` or ``optimizer.step()``. A forward that runs inside backward is recompute
    from activation checkpointing.
    """

    def __init__(self, roots: Mapping[str, torch.nn.Module] | None = None) -> None:
        """``roots``: the program's modules by name; paths are ``name.path``, or ``path`` alone
        for the module named ``""`` (a single model)."""
        self._tracker = _ModTracker()
        unnamed = (roots or {}).get("")
        self._root_name = type(unnamed).__name__ if unnamed is not None else ""
        for name, root in (roots or {}).items():
            if name:
                self._tracker._known_modules[root] = name  # ModTracker names a module by its class otherwise
        self._forward_depth = 0
        self.phase: Phase = Phase.SETUP
        self.step: int = -1

    def __enter__(self) -> ModuleScope:
        self._tracker.register_user_hooks(self._pre_forward, self._post_forward)
        self._tracker.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._tracker.__exit__(*exc)
        self._tracker.clear_user_hooks()

    def _pre_forward(self, module: torch.nn.Module, inputs: Any) -> None:
        self._forward_depth += 1

    def _post_forward(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        self._forward_depth -= 1

    @property
    def module(self) -> str:
        """Dotted path of the innermost active module, without the root class name."""
        parents = self._tracker.parents - {"Global"}
        if not parents:
            return ""
        deepest = max(parents, key=lambda name: name.count("."))
        head, _, rest = deepest.partition(".")
        return rest if head == self._root_name else deepest

    @property
    def current_phase(self) -> Phase:
        """The workload's phase, refined: forward inside backward is recompute."""
        if self.phase is Phase.BACKWARD and self._forward_depth > 0:
            return Phase.RECOMPUTE
        return self.phase


class _ModTracker(ModTracker):
    """``ModTracker`` whose backward bookkeeping holds no gradients.

    Its pre-forward hook marks a module's backward as done with an ``"all"``-mode
    ``register_multi_grad_hook`` on the module's inputs, which buffers each input's gradient
    until every one has arrived (torch/autograd/graph.py): the traced program then keeps
    gradients alive longer than the same program run untraced. ``"any"`` mode holds none; the
    module leaves the backward scope at its first input gradient instead of its last.
    """

    def _fw_pre_hook(self, mod: torch.nn.Module, input: Any) -> None:
        original = mod_tracker.register_multi_grad_hook
        mod_tracker.register_multi_grad_hook = _any_mode_grad_hook
        try:
            super()._fw_pre_hook(mod, input)
        finally:
            mod_tracker.register_multi_grad_hook = original


def _any_mode_grad_hook(tensors: Any, fn: Callable[..., None], mode: str = "all") -> Any:
    return torch.autograd.graph.register_multi_grad_hook(tensors, lambda _grad: fn(), mode="any")
