"""Which module and phase the program is in, for attributing each allocation."""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.autograd.graph import register_multi_grad_hook
from torch.distributed._tools.mod_tracker import ModTracker
from torch.nn.modules import module as torch_module
from torch.utils._pytree import tree_leaves

from .categories import Phase
from .patches import any_mode_grad_hooks

__all__ = ["ModuleScope"]


class ModuleScope:
    """Answers two questions for the tracer: the innermost active module, and the phase.

    Module context comes from torch's ``ModTracker`` (forward hooks, and multi-grad hooks in
    backward); the step phase is set by the workload, since only it knows whether it is in
    ``backward()`` or ``optimizer.step()``. A forward that runs inside backward is recompute
    from activation checkpointing. While entered, the tracker's backward bookkeeping holds no
    gradients (``patches.any_mode_grad_hooks``).
    """

    def __init__(self, roots: Mapping[str, torch.nn.Module] | None = None) -> None:
        """``roots``: the program's modules by name; paths are ``name.path``, or ``path`` alone
        for the module named ``""`` (a single model)."""
        self._tracker = ModTracker()
        for hook in ("_fw_pre_hook", "_fw_post_hook"):
            setattr(self._tracker, hook, _outside_compiled_code(getattr(self._tracker, hook)))
        self._patches = contextlib.ExitStack()
        unnamed = (roots or {}).get("")
        self._root_name = type(unnamed).__name__ if unnamed is not None else ""
        for name, root in (roots or {}).items():
            if name:  # ModTracker names a module by its class otherwise, and names children only once the
                # root's forward runs: a pipeline calls ``vae.decode``, which enters ``vae.decoder`` directly
                for path, module in root.named_modules():
                    self._tracker._known_modules[module] = f"{name}.{path}" if path else name
        self._forward_depth = 0
        self._paths: dict[frozenset[str], str] = {}
        """``module`` of each set of active modules seen: asked for every op and storage, it changes only at hooks."""
        self.phase: Phase = Phase.SETUP
        self.step: int = -1

    def __enter__(self) -> ModuleScope:
        self._patches.enter_context(any_mode_grad_hooks())
        self._tracker.register_user_hooks(self._pre_forward, self._post_forward)
        self._tracker.__enter__()
        hook = _outside_compiled_code(self._leave_backward_by_keyword)
        self._patches.callback(_remove_global_hook, torch_module.register_module_forward_hook(hook, with_kwargs=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._tracker.__exit__(*exc)
            self._tracker.clear_user_hooks()
        finally:
            self._patches.close()

    def _leave_backward_by_keyword(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        """``ModTracker`` sees a module's positional inputs only (a global pre-forward hook gets no
        keywords): a module called with keywords alone, as transformers calls attention
        (``self_attn(hidden_states=...)``), would stay in the backward scope until backward ends and
        take every later allocation. It leaves at its first keyword input's gradient instead."""
        if self._tracker.is_bw or any(_needs_grad(arg) for arg in tree_leaves(args)):
            return  # recompute, or ModTracker's own multi-grad hook on the positional inputs
        tensors = [value for value in tree_leaves(kwargs) if _needs_grad(value)]
        if tensors:
            leave = self._tracker._get_pop_fn(weakref.ref(module), self._tracker._get_mod_name(module), True)
            register_multi_grad_hook(tensors, lambda _grad: leave(), mode="any")

    def _pre_forward(self, module: torch.nn.Module, inputs: Any) -> None:
        self._forward_depth += 1

    def _post_forward(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        self._forward_depth -= 1

    @property
    def module(self) -> str:
        """Dotted path of the innermost active module, without the root class name."""
        active = frozenset(self._tracker.parents)
        path = self._paths.get(active)
        if path is None:
            path = self._paths[active] = self._innermost(active - {"Global"})
        return path

    def _innermost(self, parents: frozenset[str]) -> str:
        if not parents:
            return ""
        # ModTracker keeps a set: in backward, modules of equal depth can be active together (their
        # multi-grad hooks have not all fired); break ties by name, not by the set's hash order.
        deepest = max(parents, key=lambda name: (name.count("."), name))
        head, _, rest = deepest.partition(".")
        return rest if head == self._root_name else deepest

    @property
    def current_phase(self) -> Phase:
        """The workload's phase, refined: forward inside backward is recompute."""
        if self.phase is Phase.BACKWARD and self._forward_depth > 0:
            return Phase.RECOMPUTE
        return self.phase


def _needs_grad(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _remove_global_hook(handle: torch.utils.hooks.RemovableHandle) -> None:
    """Removes a global forward hook registered ``with_kwargs``: torch's handle forgets the hook but keeps its
    ``with_kwargs`` flag, which ``_has_any_global_hook`` then counts (dynamo warns on every later compile)."""
    handle.remove()
    torch_module._global_forward_hooks_with_kwargs.pop(handle.id, None)


def _outside_compiled_code(hook: Callable[..., None]) -> Callable[..., None]:
    """A module hook that dynamo traces as nothing: a compiled module runs no Python hooks (ModTracker
    skips itself the same way inside a ``torch.compile(module)`` wrapper, ``_is_in_optimized_module``),
    so ops inside compiled graphs are the compiled module's caller's. Nor does it run for a function
    the ``kernels`` package made a module (``_calls_a_function``)."""

    @functools.wraps(hook)
    def outside(module: torch.nn.Module, *args: Any) -> None:
        if not torch.compiler.is_compiling() and not _calls_a_function(module):
            hook(module, *args)

    return outside


def _calls_a_function(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a function made a module by the ``kernels`` package (``use_kernel_forward_from_hub`` on
    a function, as transformers 5.25 wraps ``apply_rotary_pos_emb``): one instance shared by every layer calling it,
    which calls the caller's private copy, of the same class, inside itself, so ModTracker would see one name enter
    twice and lose count. It is a function's call, not a module of the model: its ops are the caller's, as they were
    before the wrapping."""
    kind = type(module)
    return kind.__qualname__.endswith("<locals>.Func") and kind.forward.__module__.startswith("kernels.")
