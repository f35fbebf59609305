"""The named optimizers: which implementation each name builds, and how a report names it.

``adamw`` is what transformers' Trainer runs by default: ``optim="adamw_torch_fused"`` on
torch >= 2.8 (``TrainingArguments.optim``), which builds ``torch.optim.AdamW(fused=True)`` on
every device (``trainer_optimizer._get_adamw_torch``). Its kernel updates the parameters and
both states in place and allocates nothing, where torch's default foreach AdamW
(``adamw-foreach``, the Trainer's ``adamw_torch``) makes a temporary the size of all
parameters. The 8-bit optimizers and Lion are bitsandbytes' own classes, built as the Trainer
builds them (``_get_bitsandbytes_optimizer``); their states are traced as bitsandbytes
allocates them (``Optimizer2State.init_state``: uint8 states with one float32 absmax per
256-element block, float32 states below ``min_8bit_size`` elements).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vramsim.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:  # torch loads when an optimizer is built: the command line checks names without it
    import torch

__all__ = [
    "BUILDERS",
    "PAGED_STATES",
    "check_target",
    "describe_optimizer",
    "make_optimizer",
    "optimizer_over",
    "paged_states",
]

Factory = Callable[[list["torch.nn.Parameter"], bool], "torch.optim.Optimizer"]

# bitsandbytes' CPU backend logs a warning when it is imported (by peft or transformers, too) about
# an optional 4-bit kernel package that nothing vramsim runs calls; keep it off the user's screen.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class _Named:
    """One named optimizer: its factory, given the parameters and whether the target defaults to foreach."""

    build: Factory
    cpu: bool = True
    """Whether the CPU target's step is modelled: bitsandbytes' CPU update is a Python composite
    (``backends/cpu/ops.py``) whose fp32 temporaries the meta kernel it registers does not make."""


def _bitsandbytes() -> Any:
    """bitsandbytes, imported when one of its optimizers is asked for (tracing needs no GPU, only its package)."""
    return importlib.import_module("bitsandbytes")


def _torch_optim(name: str) -> Any:
    """``torch.optim.<name>``, torch imported when an optimizer is built."""
    import torch

    return getattr(torch.optim, name)


def _adamw_fused(params: list[torch.nn.Parameter], foreach: bool) -> torch.optim.Optimizer:
    made: torch.optim.Optimizer = _torch_optim("AdamW")(params, lr=1e-4, fused=True)
    return made


def _adamw_8bit(params: list[torch.nn.Parameter], foreach: bool) -> torch.optim.Optimizer:
    made: torch.optim.Optimizer = _bitsandbytes().optim.AdamW(params, lr=1e-4, optim_bits=8)
    return made


def _paged_adamw(bits: int) -> Factory:
    """The Trainer's ``paged_adamw_8bit``/``paged_adamw_32bit``: ``bnb.optim.AdamW(optim_bits=bits,
    is_paged=True)`` (``_get_bitsandbytes_optimizer``). Its ``get_state_buffer`` puts ``state1``/``state2``
    of tensors of 1e5 elements or more in CUDA managed memory (``F.get_paged``: ``cudaMallocManaged``),
    which meta tensors cannot have; on meta they are made as the unpaged optimizer makes them, on the
    device where ``prefetch_state`` moves them before each update (see ``PAGED_STATES``)."""

    def build(params: list[torch.nn.Parameter], foreach: bool) -> torch.optim.Optimizer:
        made: torch.optim.Optimizer = _bitsandbytes().optim.AdamW(params, lr=1e-4, optim_bits=bits, is_paged=True)
        if any(p.device.type == "meta" for p in params):
            made.is_paged = False  # type: ignore[attr-defined]
            made.traced_paged = True  # type: ignore[attr-defined]
        return made

    return build


def _muon(params: list[torch.nn.Parameter], foreach: bool) -> torch.optim.Optimizer:
    from vramsim.workload.muon import MuonWithAdamW  # a torch.optim.Optimizer subclass: torch loads with it

    return MuonWithAdamW(params)


BUILDERS: dict[str, _Named] = {
    # torch AdamW, fused kernel: the Trainer's default (adamw_torch_fused)
    "adamw": _Named(_adamw_fused),
    # torch AdamW as torch picks it: foreach on GPUs, for-loop on the CPU (the Trainer's adamw_torch)
    "adamw-foreach": _Named(lambda params, foreach: _torch_optim("AdamW")(params, lr=1e-4, foreach=foreach)),
    "adam": _Named(lambda params, foreach: _torch_optim("Adam")(params, lr=1e-4, foreach=foreach)),
    "sgd": _Named(lambda params, foreach: _torch_optim("SGD")(params, lr=1e-3, momentum=0.9, foreach=foreach)),
    "adafactor": _Named(lambda params, foreach: _torch_optim("Adafactor")(params, lr=1e-2, foreach=foreach)),
    # bitsandbytes AdamW with 8-bit block-wise states (the Trainer's adamw_bnb_8bit)
    "adamw8bit": _Named(_adamw_8bit, cpu=False),
    # bitsandbytes AdamW with 8-bit states, the large ones in CUDA managed memory (the Trainer's paged_adamw_8bit)
    "paged-adamw8bit": _Named(_paged_adamw(8), cpu=False),
    # bitsandbytes AdamW with fp32 states, the large ones in CUDA managed memory (the Trainer's paged_adamw_32bit)
    "paged-adamw32bit": _Named(_paged_adamw(32), cpu=False),
    # torch.optim.Muon on 2-D weights, fused AdamW on the rest
    "muon": _Named(_muon),
    # bitsandbytes Lion with one fp32 state (the Trainer's lion_32bit)
    "lion": _Named(lambda params, foreach: _bitsandbytes().optim.Lion(params, lr=1e-4, optim_bits=32), cpu=False),
}
"""How each of the config's ``OPTIMIZERS`` is built, by its short name."""

PAGED_STATES = (
    "bitsandbytes' paged optimizers keep state1/state2 of tensors of 1e5 elements or more in CUDA managed "
    "memory (cudaMallocManaged, outside PyTorch's caching allocator): they are not in the allocated and reserved "
    "figures (torch.cuda.max_memory_allocated does not show them) but reported apart as paged optimizer states, "
    "assumed resident on the device (prefetch_state moves each there before its update) and counted in the device "
    "figure. The driver evicts them to host memory when the device runs short, so a run over the usable memory "
    "only by them fits, paging (slower), and does not fail"
)
"""How the paged optimizers' managed-memory states are counted: listed in the report's assumptions."""


PAGED_MIN_ELEMENTS = 1e5
"""bitsandbytes' ``Optimizer8bit.get_state_buffer``: a parameter of at least this many elements gets paged states."""


def paged_states(optimizer: Any) -> list[torch.Tensor]:
    """A paged optimizer's ``state1``/``state2`` in managed memory (of parameters of 1e5 elements or more, as
    bitsandbytes' ``get_state_buffer`` pages them); none for another optimizer."""
    if not getattr(optimizer, "traced_paged", False):
        return []
    return [
        state[key]
        for p, state in optimizer.state.items()
        if p.numel() >= PAGED_MIN_ELEMENTS
        for key in ("state1", "state2")
        if key in state
    ]


def check_target(optimizer: Any, vendor: str) -> None:
    """Refuse a named optimizer whose step on this target is not modelled."""
    if isinstance(optimizer, str) and vendor == "cpu" and not BUILDERS[optimizer].cpu:
        raise UnsupportedError(
            f"--optimizer {optimizer} on the cpu target: bitsandbytes' CPU step makes fp32 temporaries vramsim does not "
            "model yet; use a GPU target, where its CUDA kernel updates in place"
        )


def make_optimizer(model: torch.nn.Module, optimizer: Any, *, foreach: bool) -> torch.optim.Optimizer | None:
    """The optimizer over ``model``'s trainable parameters; ``foreach``: the target's default
    for the implementations torch picks per device."""
    return optimizer_over([p for p in model.parameters() if p.requires_grad], optimizer, foreach=foreach)


def optimizer_over(params: list[torch.nn.Parameter], optimizer: Any, *, foreach: bool) -> torch.optim.Optimizer | None:
    """The optimizer ``optimizer`` names (or a factory builds) over ``params``."""
    import torch

    if optimizer is None:
        return None
    if callable(optimizer):
        made = optimizer(params)
        if not isinstance(made, torch.optim.Optimizer):
            raise ConfigError(f"the optimizer factory returned {type(made).__name__}, not a torch.optim.Optimizer")
        return made
    assert optimizer in BUILDERS, f"optimizer {optimizer!r} passed the config check but has no factory"
    return BUILDERS[optimizer].build(params, foreach)


def describe_optimizer(optimizer: torch.optim.Optimizer) -> str:
    """The class and the kernel choice that runs, e.g. ``torch.optim.AdamW (fused)``."""
    from vramsim.workload.muon import MuonWithAdamW
    from vramsim.workload.optimizer_in_backward import OptimizerInBackward

    if isinstance(optimizer, MuonWithAdamW):
        return " + ".join(describe_optimizer(part) for part in optimizer.parts)
    if isinstance(optimizer, OptimizerInBackward):
        return f"{describe_optimizer(optimizer.first)} per parameter, stepped in backward"
    cls = type(optimizer)
    module = cls.__module__
    name = f"{'torch.optim' if module.startswith('torch.optim') else module.split('.')[0]}.{cls.__name__}"
    defaults = optimizer.defaults
    if defaults.get("fused"):
        return f"{name} (fused)"
    if "foreach" in defaults:
        return f"{name} ({'foreach' if defaults['foreach'] else 'for-loop'})"
    bits = getattr(getattr(optimizer, "args", None), "optim_bits", None)
    paged = ", paged" if getattr(optimizer, "is_paged", False) or getattr(optimizer, "traced_paged", False) else ""
    return f"{name} ({bits}-bit states{paged})" if bits else name
