"""ATen's own C++ meta kernels, in place of the Python ones torch puts over them, while a trace runs.

On import, torch registers a Python meta function (its ``torch._refs`` decompositions and
``torch._meta_registrations``) over the C++ meta kernel of some 600 ops that have one, pointwise
arithmetic among them (``torch._meta_registrations.activate_meta``): ``x * y`` on meta tensors then
costs about 100 us of Python instead of 2 us. The C++ kernel of a structured op is the very meta function
the CPU and CUDA kernels size their outputs with, so a real run allocates what it says. While
``native_meta_kernels`` is entered, the ops that have a C++ meta kernel run it; the others keep their
Python one; on exit torch's registrations are back as they were.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._meta_registrations as meta_registrations
from torch._decomp import global_decomposition_table
from torch._ops import OpOverload

__all__ = ["native_meta_kernels"]

_LIBRARY = "_meta_lib_dont_use_me_use_register_meta"
"""The ``torch.library.Library`` of torch's Python meta kernels, a global of ``torch._meta_registrations``."""
_TABLES = ("meta", "post_autograd", "pre_autograd")
"""Where ``activate_meta`` finds each op's Python meta function, most specific first."""

_lock = threading.Lock()
_depth = 0
_ops: list[str] = []
"""The ops torch's library held before the swap (``name.overload``): what the swap back registers."""


@contextlib.contextmanager
def native_meta_kernels() -> Iterator[None]:
    """C++ meta kernels where ATen has them; reentrant. If torch's library holds a kernel this cannot put
    back (one not from its decomposition tables), nothing is changed."""
    global _depth
    with _lock:
        swapped = _depth > 0 or _swap_in()
        _depth += swapped
    try:
        yield
    finally:
        if swapped:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    _register(_ops + _held(), _python_meta_functions(), keep=lambda op: True)


def _swap_in() -> bool:
    functions = _python_meta_functions()
    ops = _held()
    if any(op not in functions for op in ops):
        return False
    _ops[:] = ops
    _register(ops, functions, keep=_python_only)
    return True


def _held() -> list[str]:
    """The ops (``name.overload``) torch's library of Python meta kernels holds now."""
    return sorted(key.split("/")[1] for key in getattr(meta_registrations, _LIBRARY)._op_impls)


def _register(ops: list[str], functions: dict[str, tuple[OpOverload, Any]], *, keep: Callable[[str], bool]) -> None:
    """Replace torch's library of Python meta kernels by one holding those of ``ops`` that ``keep`` names."""
    getattr(meta_registrations, _LIBRARY)._destroy()
    replacement = torch.library.Library("aten", "IMPL", "Meta")
    for op in dict.fromkeys(ops):
        if keep(op):
            overload, function = functions[op]
            replacement.impl(overload, function)
    setattr(meta_registrations, _LIBRARY, replacement)


def _python_only(op: str) -> bool:
    """Whether ``op`` has no C++ meta kernel: asked once torch's Python one is gone."""
    return not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "Meta")


def _python_meta_functions() -> dict[str, tuple[OpOverload, Any]]:
    """Each op's Python meta function, as ``activate_meta`` picked it."""
    found: dict[str, tuple[OpOverload, Any]] = {}
    for table in _TABLES:
        for overload, function in global_decomposition_table[table].items():
            if isinstance(overload, OpOverload) and overload.namespace == "aten":
                found.setdefault(overload.name().removeprefix("aten::"), (overload, function))
    return found
