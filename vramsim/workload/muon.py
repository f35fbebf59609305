"""Muon paired with AdamW as one optimizer (``--optimizer muon``); its own module so that the
optimizer names load without torch."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["MuonWithAdamW"]


class MuonWithAdamW(torch.optim.Optimizer):
    """``torch.optim.Muon`` for the 2-D weights and fused AdamW for the rest (biases, norms), paired as
    Muon's docstring pairs them: Muon takes 2-D parameters only. One momentum buffer per matrix; each
    step orthogonalises one matrix at a time in bfloat16 (``_zeropower_via_newtonschulz``)."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        matrices = [p for p in params if p.ndim == 2]
        others = [p for p in params if p.ndim != 2]
        self.parts: list[torch.optim.Optimizer] = []
        if matrices:
            self.parts.append(torch.optim.Muon(matrices, lr=0.02, momentum=0.95))
        if others:
            self.parts.append(torch.optim.AdamW(others, lr=3e-4, weight_decay=0.01, fused=True))
        super().__init__([{"params": group["params"]} for part in self.parts for group in part.param_groups], {})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for part in self.parts:
            part.step()
            self.state.update(part.state)
