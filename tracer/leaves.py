"""The tensors in an op's arguments or results, found without pytree's generality.

Aten ops take and return tensors, tuples and lists of them, scalars and ``None`` (plus a kwargs
dict): walking those directly finds what ``tree_flatten`` finds, in its order, at a fraction of
its cost, which matters on the tracer's path through every op.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["attached_tensors", "is_wrapper_subclass", "is_wrapper_type", "tensor_leaves"]


def tensor_leaves(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    found: list[torch.Tensor] = []
    if isinstance(obj, (tuple, list, dict)):
        _collect(obj, found)
    return found


def _collect(container: tuple[Any, ...] | list[Any] | dict[Any, Any], found: list[torch.Tensor]) -> None:
    """Depth first, in order, into ``found``: a list, not nested generators, each of which would pass
    every tensor up through every level."""
    for item in container.values() if isinstance(container, dict) else container:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list, dict)):
            _collect(item, found)


def attached_tensors(param: torch.Tensor) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors a parameter object holds as attributes, with their dotted names: quantized weights
    keep their format's metadata there (bitsandbytes' ``quant_state.absmax``, ``.code``, the nested
    ``state2``; LLM.int8's ``SCB``), on the device beside the packed data and for as long. A held tensor
    that wraps others (quanto's ``PackedTensor``) is the tensors it wraps."""
    seen = {id(param)}

    def visit(obj: Any, prefix: str, depth: int) -> Iterator[tuple[str, torch.Tensor]]:
        for name, value in vars(obj).items():
            if id(value) in seen or isinstance(value, torch.nn.Module):
                continue
            seen.add(id(value))
            if isinstance(value, torch.Tensor) and is_wrapper_subclass(value):
                yield from _inner(value, f"{prefix}{name}.")
            elif isinstance(value, torch.Tensor):
                yield f"{prefix}{name}", value
            elif depth and hasattr(value, "__dict__") and not isinstance(value, type):
                yield from visit(value, f"{prefix}{name}.", depth - 1)

    yield from visit(param, "", 2)


def _inner(wrapper: torch.Tensor, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    """The plain tensors a wrapper subclass holds (``__tensor_flatten__``'s names), through nested wrappers."""
    names, _ = wrapper.__tensor_flatten__()  # type: ignore[attr-defined]
    for name in names:
        inner = getattr(wrapper, name)
        if is_wrapper_subclass(inner):
            yield from _inner(inner, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", inner


def is_wrapper_subclass(tensor: torch.Tensor) -> bool:
    """Subclasses such as DTensor or torchao's quantized tensors wrap inner tensors; the inner ones carry the memory."""
    return is_wrapper_type(type(tensor))


def is_wrapper_type(cls: type) -> bool:
    """Whether ``cls`` is such a subclass (``is_wrapper_subclass``)."""
    return cls not in (torch.Tensor, torch.nn.Parameter) and hasattr(cls, "__tensor_flatten__")
