"""The input copies a CPU binary op makes when its operands' dtypes differ.

aten/src/ATen/TensorIterator.cpp ``compute_types``: on the CPU (``common_device == kCPU``) a binary op's
iterator (``promote_inputs_to_common_dtype``) replaces each input whose dtype is not the common one with
``input.to(common_dtype)``, a full-size copy of that input freed when the op returns; CUDA kernels cast as
they read. Meta kernels allocate the output only. Dimensioned inputs only: a 0-dim operand (a Python
number, a scalar tensor) takes part in the op as a scalar.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["binary_promotion_copies"]

aten = torch.ops.aten
_BINARY = frozenset({aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor})


def binary_promotion_copies(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
    """The CPU target's workspace rule: one copy per dimensioned input not in the common dtype."""
    if func not in _BINARY or len(args) < 2 or not all(isinstance(a, torch.Tensor) for a in args[:2]):
        return []
    common = torch.result_type(args[0], args[1])
    return [a.numel() * common.itemsize for a in args[:2] if a.dim() > 0 and a.dtype != common]
