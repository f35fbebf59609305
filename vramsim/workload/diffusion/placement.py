"""Where diffusers' offloading hooks put a weight: the compute device or the host, as the run in progress has them.

diffusers' group offloading takes its two devices as arguments and moves each weight with ``Tensor.to``; which
weights move when is the library's own decision. Here the hooks are given two device names that no other code
uses, ``COMPUTE`` (``cpu:0``) and ``HOST`` (``cpu:1``), and ``Placement`` gives those moves one meaning whether the
run is traced (its compute device meta) or run for real on the CPU (the ground truth):

- a weight sent to the compute device is a new tensor there (zeros: the host kept no values), which the tracer
  or the CPU's allocator counts;
- a weight sent to the host is a stand-in of its shape on the compute device that holds no memory: one shared
  element, expanded (``param.data`` takes only a tensor of its own device type).

The CPU run's profiler then measures what the compute device would hold: the weights resident as the hooks leave
them, and the activations; host memory is not measured.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["COMPUTE", "HOST", "Placement"]

COMPUTE = torch.device("cpu", 0)
"""The hooks' onload device."""

HOST = torch.device("cpu", 1)
"""The hooks' offload device."""

_STAND_IN_DTYPES = (
    torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float64,
    torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool,
)  # fmt: skip
"""The dtypes a host stand-in is made in, each from one element made before the run."""


class Placement(TorchFunctionMode):
    """``Tensor.to(COMPUTE)`` and ``Tensor.to(HOST)`` as the run places them; every other call as is.

    ``weights``, where given, are the tensors on the compute device before the run: then a move of one of them
    (or of a copy the mode placed) to the plain ``cpu`` is a move to the host too, as accelerate's CPU offload
    spells it; and on the real CPU those weights say they are on ``COMPUTE``, so a library that asks whether a
    weight is already on the CPU gets the answer a GPU run would give it.
    """

    def __init__(self, *, device: str, weights: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self._device = device
        self._elements = {dtype: torch.empty((), dtype=dtype, device=device) for dtype in _STAND_IN_DTYPES}
        self._stand_ins = {id(element.untyped_storage()) for element in self._elements.values()}
        self._resident: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        """The weights' storages on the compute device, by id (a weakref tells a reused id apart)."""
        for tensor in weights:
            self._reside(tensor)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            target = _device_of(args[1:], kwargs)
            host = target == HOST or (target == _PLAIN_CPU and self._resides(args[0]))
            if target == COMPUTE or host:
                tensor = args[0]
                dtype = _dtype_of(args[1:], kwargs) or tensor.dtype
                return self._placed(tensor if dtype == tensor.dtype else func(tensor, dtype), host=host)
        if getattr(func, "__self__", None) is _DEVICE and self._device == "cpu" and self._resides(args[0]):
            return COMPUTE
        return func(*args, **kwargs)

    def _placed(self, tensor: torch.Tensor, *, host: bool) -> torch.Tensor:
        if (id(tensor.untyped_storage()) in self._stand_ins) == host:
            return tensor
        if host:
            return self._elements[tensor.dtype].expand(tensor.shape)
        placed = torch.zeros(tensor.shape, dtype=tensor.dtype, device=self._device)
        self._reside(placed)
        return placed

    def _reside(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        self._resident[id(storage)] = weakref.ref(storage)

    def _resides(self, tensor: torch.Tensor) -> bool:
        with torch._C.DisableTorchFunction():
            storage = tensor.untyped_storage()
        known = self._resident.get(id(storage))
        return known is not None and known() is storage


_PLAIN_CPU = torch.device("cpu")
_DEVICE = torch.Tensor.device
"""``Tensor.device``'s descriptor: reading it comes to the mode as its ``__get__``."""


def _device_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device a ``Tensor.to`` call names, if any (a string, a ``torch.device``, or another tensor's)."""
    given = kwargs.get("device", next((a for a in args if isinstance(a, (str, torch.device, torch.Tensor))), None))
    if isinstance(given, torch.Tensor):
        return given.device
    return torch.device(given) if given is not None else None


def _dtype_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.dtype | None:
    """The dtype a ``Tensor.to`` call names, if any."""
    return kwargs.get("dtype", next((a for a in args if isinstance(a, torch.dtype)), None))
