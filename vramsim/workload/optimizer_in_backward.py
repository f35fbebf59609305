"""The optimizer step fused into backward, as torchtune's ``optimizer_in_bwd`` runs it.

torchtune 0.6.1's full-finetune recipes build one optimizer per parameter (``_setup_optimizer``:
``{p: config.instantiate(cfg_optimizer, [p]) for p in model.parameters()}``) and register
``training.register_optim_in_bwd_hooks``: each parameter's ``register_post_accumulate_grad_hook`` runs
``optim_dict[param].step()`` then ``optim_dict[param].zero_grad()`` (set_to_none), so a gradient lives only
from its accumulation to its own step, and the recipe's loop calls no ``step()`` after backward. This is
torch's pattern of the "optimizer step in backward" tutorial; the optimizer states are made at each
parameter's first step, inside backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vramsim.tracer.categories import Category

__all__ = ["OptimizerInBackward"]


class OptimizerInBackward(torch.optim.Optimizer):
    """An optimizer per trainable parameter, each stepped by its parameter's post-accumulate-grad hook.

    ``step()`` does nothing (the steps ran in backward); ``state`` holds each parameter's state as its own
    optimizer made it, so the step's states are found where a single optimizer's are. ``observer``, where set,
    is told each gradient's role before its step frees it.
    """

    def __init__(self, model: torch.nn.Module, build: Callable[[list[torch.nn.Parameter]], Any]) -> None:
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        self.names = {p: name for name, p in named}
        self.optimizers: dict[torch.nn.Parameter, torch.optim.Optimizer] = {p: build([p]) for _, p in named}
        self.observer: Any = None
        super().__init__([p for _, p in named], dict(self.first.defaults))
        for _, param in named:
            param.register_post_accumulate_grad_hook(self._step_and_clear)

    @property
    def first(self) -> torch.optim.Optimizer:
        """One parameter's optimizer: all are alike."""
        return next(iter(self.optimizers.values()))

    def _step_and_clear(self, param: torch.Tensor) -> None:
        """``optim_dict[param].step(); optim_dict[param].zero_grad()``: the gradient freed right after its step."""
        optimizer = self.optimizers[param]  # type: ignore[index]
        if self.observer is not None:
            self.observer.mark_owned([(self.names[param], param.grad)], Category.GRADIENT)  # type: ignore[index]
        optimizer.step()
        self.state[param] = optimizer.state[param]
        optimizer.zero_grad(set_to_none=True)

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        """Nothing left to step: each parameter stepped when its gradient was ready."""
        if closure is not None:
            raise RuntimeError("the optimizer steps in backward; it takes no closure")

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=set_to_none)
