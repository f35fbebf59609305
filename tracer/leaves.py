"""The tensors in an op's arguments or results, found without pytree's generality.

Aten ops take and return tensors, tuples and lists of them, scalars and ``None`` (plus a kwargs
dict): walking those directly finds what ``tree_flatten`` finds, in its order, at a fraction of
its cost, which matters on the tracer's path through every op.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["tensor_leaves"]


def tensor_leaves(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from tensor_leaves(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from tensor_leaves(item)
