"""Every attribute of torch or transformers that vramsim replaces while it traces, with its undo.

Meta tensors and the dispatcher miss a few things a real run does (an RNG state built in C++,
an autocast that skips meta tensors, a hook that buffers gradients); vramsim swaps the Python
function responsible for each, only while a simulation runs. Each swap is a named ``Patch``
whose ``applied`` context puts the original back in ``finally``. Every replacement carries
``__vramsim_patch__`` (its patch's name), so ``leftovers`` can prove none outlives a run.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch.utils._mode_utils import no_dispatch
from torch.utils._pytree import tree_map

__all__ = [
    "PATCHES", "Patch", "any_mode_grad_hooks", "checkpoint_recomputes_under", "dispatched_rng_state", "emulated_autocast",
    "flash_attn_installed",
    "foreach_clipping_on_meta", "fp8_kernels_on_meta", "fused_optimizers_on_meta",
    "host_checkpoint_device", "leftovers", "quanto_qbits_for_target", "torchao_float8_hardware_checked",
    "torchao_int4_on_meta",
    "torchao_tinygemm_capability_checked",
]  # fmt: skip

_MARK = "__vramsim_patch__"


@dataclass(frozen=True, slots=True)
class Patch:
    """``module.attribute`` replaced while ``applied`` is entered."""

    name: str
    module: str
    attribute: str
    by_name: bool = False
    """Other modules import the attribute by name (``from m import f``): every loaded module
    holding the original gets the replacement, and on exit every module holding the
    replacement (one imported meanwhile too) gets the original back."""
    owner: str | None = None
    """A class of ``module`` whose attribute (a method) is replaced, instead of the module's own."""

    def current(self) -> Any:
        """The attribute as it is now (a method: the function the class holds)."""
        return vars(self._owner()).get(self.attribute) if self.owner else getattr(self._owner(), self.attribute)

    def exists(self) -> bool:
        """Whether this library release has the attribute (some are newer than transformers 4.42)."""
        return hasattr(self._owner(), self.attribute)

    def _owner(self) -> Any:
        module = importlib.import_module(self.module)
        return getattr(module, self.owner) if self.owner else module

    @contextlib.contextmanager
    def applied(self, make: Callable[[Any], Callable[..., Any]]) -> Iterator[None]:
        """Replace the attribute with ``make(original)`` until exit; re-entrant."""
        owner = self._owner()
        original = self.current()
        replacement = _marked(make(original), self.name)
        loaded = set(sys.modules) if self.by_name else set()
        holders = _holders(original, self.attribute) if self.by_name else [owner]
        for module in holders:
            setattr(module, self.attribute, replacement)
        try:
            yield
        finally:
            for module, name in _references(replacement, holders, loaded) if self.by_name else [(owner, self.attribute)]:
                setattr(module, name, original)


RNG_STATE = Patch("rng_state", "torch", "get_rng_state")
MAYBE_AUTOCAST = Patch("maybe_autocast", "transformers.utils.generic", "maybe_autocast", by_name=True)
META_AUTOCAST = Patch("meta_autocast", "torch", "autocast")
MULTI_GRAD_HOOK = Patch("multi_grad_hook", "torch.distributed._tools.mod_tracker", "register_multi_grad_hook")
CHECKPOINT_DEVICE = Patch("checkpoint_device", "torch.utils.checkpoint", "_infer_device_type")
CHECKPOINT_RECOMPUTE = Patch("checkpoint_recompute", "torch.utils.checkpoint", "_checkpoint_without_reentrant_generator")
FLASH_INSTALLED = Patch("flash_installed", "transformers.modeling_utils", "_flash_attn_import_error", owner="PreTrainedModel")
FLASH_IMPORTS = Patch("flash_imports", "transformers.modeling_flash_attention_utils", "lazy_import_flash_attention", by_name=True)
FLASH_TARGET_DTYPE = Patch("flash_target_dtype", "transformers.integrations.flash_attention", "get_target_dtype", by_name=True)
FLASH_KERNELS_FALLBACK = Patch("flash_kernels_fallback", "transformers.modeling_utils", "is_kernels_available")
FUSED_DEVICES = Patch("fused_devices", "torch.utils._foreach_utils", "_get_fused_kernels_supported_devices", by_name=True)
FOREACH_DEVICE = Patch("foreach_device", "torch.utils._foreach_utils", "_device_has_foreach_support", by_name=True)
FP8_LINEAR = Patch("fp8_linear", "transformers.integrations.finegrained_fp8", "fp8_linear")
_INT4_TENSOR = "torchao.quantization.quantize_.workflows.int4.int4_tensor"
INT4_ROW_QUANTIZE = Patch("int4_row_quantize", _INT4_TENSOR, "int4_row_quantize_zp")
INT4_PACK = Patch("int4_pack", _INT4_TENSOR, "pack_int4")
FLOAT8_HARDWARE = Patch("float8_hardware", "torchao.quantization.quant_api", "_check_hardware_support")
DEVICE_CAPABILITY = Patch("device_capability", "torch.cuda", "get_device_capability")
QUANTO_QBITS_CREATE = Patch("quanto_qbits_create", "optimum.quanto.tensor.weights.qbits", "create", owner="WeightQBitsTensor")
QUANTO_TINYGEMM_PACK = Patch(
    "quanto_tinygemm_pack", "optimum.quanto.tensor.weights.tinygemm.packed", "pack", owner="TinyGemmPackedTensor"
)
QUANTO_TINYGEMM_FORWARD = Patch(
    "quanto_tinygemm_forward", "optimum.quanto.tensor.weights.tinygemm.qbits", "forward", owner="TinyGemmQBitsLinearFunction"
)
PATCHES = (
    RNG_STATE,
    MAYBE_AUTOCAST,
    META_AUTOCAST,
    MULTI_GRAD_HOOK,
    CHECKPOINT_DEVICE,
    CHECKPOINT_RECOMPUTE,
    FLASH_INSTALLED,
    FLASH_IMPORTS,
    FLASH_TARGET_DTYPE,
    FUSED_DEVICES,
    FOREACH_DEVICE,
    FP8_LINEAR,
    INT4_ROW_QUANTIZE,
    INT4_PACK,
    FLOAT8_HARDWARE,
    DEVICE_CAPABILITY,
    QUANTO_QBITS_CREATE,
    QUANTO_TINYGEMM_PACK,
    QUANTO_TINYGEMM_FORWARD,
)
"""The registry: nothing else in vramsim assigns to an attribute of torch or transformers."""


def dispatched_rng_state() -> contextlib.AbstractContextManager[None]:
    """``torch.get_rng_state()`` builds its tensor in C++, out of the dispatcher's sight;
    activation checkpointing keeps one per block until recompute. Return the state in a tensor
    made by a dispatched op, so the tracer sees that one allocation; the state is copied in out
    of the tracer's sight, so the C++ original is not taken for a tensor older than the trace."""
    return RNG_STATE.applied(lambda original: functools.partial(_dispatched_state, original))


def _dispatched_state(original: Callable[[], torch.Tensor]) -> torch.Tensor:
    state = original()
    made = torch.empty(state.shape, dtype=state.dtype, device=state.device)
    with no_dispatch():
        made.copy_(state)
    return made


def host_checkpoint_device() -> contextlib.AbstractContextManager[None]:
    """Where meta tensors stand for host tensors (the CPU target): ``torch.utils.checkpoint``
    leaves host tensors out when it infers whose RNG state to fork, falls back to the default
    device type and forks the host RNG state around each recompute, a tensor a CPU run allocates.
    Seen as meta, the tensors make ``torch.random.fork_rng`` return at once and skip that state."""
    return CHECKPOINT_DEVICE.applied(lambda original: lambda *args: original(*tree_map(_meta_as_host, args)))


def _meta_as_host(value: Any) -> Any:
    return None if isinstance(value, torch.Tensor) and value.device.type == "meta" else value


def emulated_autocast(replacement: Callable[..., Any]) -> contextlib.AbstractContextManager[None]:
    """transformers' ``maybe_autocast`` skips meta tensors; route it to the emulated autocast. A transformers
    without it (4.42) has its models call ``torch.autocast(device_type=x.device.type, ...)``, which torch
    refuses for meta: those calls, and only those, go to the emulated autocast instead."""
    if MAYBE_AUTOCAST.exists():
        return MAYBE_AUTOCAST.applied(lambda original: replacement)
    return META_AUTOCAST.applied(lambda original: functools.partial(_autocast_on_meta, original, replacement))


def _autocast_on_meta(
    original: Callable[..., Any], replacement: Callable[..., Any], device_type: str, *args: Any, **kwargs: Any
) -> Any:
    return (replacement if device_type == "meta" else original)(device_type, *args, **kwargs)


def checkpoint_recomputes_under(
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> contextlib.AbstractContextManager[None]:
    """Every non-reentrant ``torch.utils.checkpoint`` runs its function as ``wrap(function)``, however the
    checkpoint was asked for (a user's own ``gradient_checkpointing_enable()`` passes no ``context_fn``):
    the recompute runs inside autograd's engine, where the emulation's torch-function mode is not on,
    and ``wrap`` puts it back (``KernelEmulation.recomputing``)."""
    return CHECKPOINT_RECOMPUTE.applied(lambda original: functools.partial(_recomputed_under, original, wrap))


def _recomputed_under(
    original: Callable[..., Any],
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]],
    fn: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    return original(wrap(fn), *args, **kwargs)


def any_mode_grad_hooks() -> contextlib.AbstractContextManager[None]:
    """``ModTracker``'s pre-forward hook registers an ``"all"``-mode multi-grad hook, which
    buffers each input's gradient until every one has arrived (torch/autograd/graph.py): the
    traced program would keep gradients alive longer than the same program run untraced.
    ``"any"`` mode holds none; a module leaves the backward scope at its first input gradient."""
    return MULTI_GRAD_HOOK.applied(lambda original: _any_mode_grad_hook)


def _any_mode_grad_hook(tensors: Any, fn: Callable[..., None], mode: str = "all") -> Any:
    return torch.autograd.graph.register_multi_grad_hook(tensors, lambda _grad: fn(), mode="any")


def flash_attn_installed(
    functions: tuple[Callable[..., Any], Callable[..., Any]], autocast_dtype: Callable[[], torch.dtype | None]
) -> contextlib.ExitStack[bool | None]:
    """transformers accepts ``flash_attention_N`` only where flash-attn is installed on a CUDA
    machine (``PreTrainedModel._flash_attn_import_error``) and imports its functions when the
    model is built and at each call (``lazy_import_flash_attention``). For a target that runs
    flash-attn, pass that check and hand transformers ``functions``, stand-ins for
    ``flash_attn_func`` and ``flash_attn_varlen_func``; the rest of its flash path (transposes,
    casts, unpadding) runs as it is. ``get_target_dtype``, which casts float32 queries to the
    autocast dtype, asks ``torch.is_autocast_enabled`` about the tensors' device: for meta
    tensors it asks ``autocast_dtype``, the emulated autocast, instead. Where flash-attn is not
    installed and the ``kernels`` package is, transformers 5.25 takes a Hub kernel instead
    (``kernels-community/flash-attn2``, ``_check_and_adjust_attn_implementation``): the stand-ins
    are flash-attn's own, so that fallback is off."""
    stack = contextlib.ExitStack()
    if FLASH_KERNELS_FALLBACK.exists():
        stack.enter_context(FLASH_KERNELS_FALLBACK.applied(lambda original: _no_kernels))
    stack.enter_context(FLASH_INSTALLED.applied(lambda original: _installed))
    stack.enter_context(FLASH_IMPORTS.applied(lambda original: functools.partial(_stand_in_imports, functions)))
    stack.enter_context(FLASH_TARGET_DTYPE.applied(lambda original: functools.partial(_target_dtype, original, autocast_dtype)))
    return stack


def _target_dtype(
    original: Callable[..., Any], autocast_dtype: Callable[[], torch.dtype | None], query: torch.Tensor, module: Any
) -> torch.dtype | None:
    """integrations/flash_attention.py ``get_target_dtype``, its autocast question answered by the
    emulation on meta: a float32 query is cast to the autocast dtype, else to the quantized
    model's dtype, else to its first Linear's weight dtype."""
    if query.dtype != torch.float32 or query.device.type != "meta":
        return original(query, module)
    dtype = autocast_dtype()
    if dtype is not None:
        return dtype
    if hasattr(module.config, "_is_quantized"):
        return module.config.dtype
    return next(layer for layer in module.modules() if isinstance(layer, torch.nn.Linear)).weight.dtype


def _no_kernels() -> bool:
    return False


def _installed(self: Any, *args: Any, **kwargs: Any) -> None:
    """The check passes: flash-attn is installed and the device can run it (vramsim checks the target)."""


def _stand_in_imports(functions: tuple[Callable[..., Any], Callable[..., Any]], *args: Any, **kwargs: Any) -> Any:
    """What ``lazy_import_flash_attention`` returns, with ``functions`` as flash-attn's; transformers'
    own pad/unpad and keyword filtering (read from the stand-ins' signatures)."""
    from transformers import modeling_flash_attention_utils as fa_utils

    flash, varlen = functions
    process = fa_utils._lazy_define_process_function(varlen)
    return (flash, varlen, None, fa_utils._pad_input, fa_utils._unpad_input), (process, dict)


def fused_optimizers_on_meta() -> contextlib.AbstractContextManager[None]:
    """``torch.optim``'s ``fused=True`` checks each parameter's device against a list without
    meta (torch/optim/optimizer.py ``_device_dtype_check_for_fused``), though meta stands for a
    target whose fused kernels exist (CUDA, CPU) and ``_fused_adam_``/``_fused_adamw_``/
    ``_fused_sgd_`` have meta kernels. Add meta to that list, so the fused step traces: its meta
    kernels update in place and allocate nothing, as the CUDA kernels do (the tensor addresses
    travel as kernel arguments, ``multi_tensor_apply_for_fused_optimizer``)."""
    return FUSED_DEVICES.applied(lambda original: lambda: [*original(), "meta"])


def foreach_clipping_on_meta() -> contextlib.AbstractContextManager[None]:
    """``clip_grad_norm_`` (torch/nn/utils/clip_grad.py) takes its foreach path, ``_foreach_norm`` and
    ``_foreach_mul_``, on CUDA and CPU tensors (``_device_has_foreach_support``), and a per-tensor loop
    on others, meta included; meta stands for such a target, so let it take the foreach path. Only
    clip_grad asks this question (torch.optim reads ``_get_foreach_kernels_supported_devices``)."""
    return FOREACH_DEVICE.applied(lambda original: lambda device: device.type == "meta" or original(device))


def fp8_kernels_on_meta(stand_in: Callable[..., torch.Tensor]) -> contextlib.AbstractContextManager[None]:
    """transformers' ``FP8Linear`` hands its input to a kernel fetched from the Hub (DeepGEMM or
    Triton, integrations/finegrained_fp8.py ``fp8_linear``), which meta tensors cannot run; while
    an FP8 model is simulated, ``stand_in`` takes its place and makes on meta what they allocate."""
    return FP8_LINEAR.applied(lambda original: stand_in)


def torchao_int4_on_meta() -> contextlib.ExitStack[bool | None]:
    """torchao's ``Int4Tensor`` quantizes with mslk's ``int4_row_quantize_zp`` and ``pack_int4`` and
    multiplies with ``torch.ops.mslk.bf16i4bf16_rowwise``, a CUDA package torchao imports if it can;
    while an int4 model is built and traced on meta, stand-ins make what they make
    (``tracer/kernels/torchao_int4.py``)."""
    from vramsim.tracer.kernels.torchao_int4 import mslk_int4_gemm_on_meta, pack_int4, row_quantize_zp

    stack = contextlib.ExitStack()
    stack.enter_context(INT4_ROW_QUANTIZE.applied(lambda original: row_quantize_zp))
    stack.enter_context(INT4_PACK.applied(lambda original: pack_int4))
    stack.enter_context(mslk_int4_gemm_on_meta())
    return stack


def torchao_float8_hardware_checked() -> contextlib.AbstractContextManager[None]:
    """torchao's float8 configs assert that this machine has a CUDA GPU of sm 8.9+
    (``float8/inference.py _check_hardware_support``); vramsim checked the target instead
    (``workload/quantization/torchao.py``'s ``check_torchao``), so quantizing on meta, or on the CPU for a ground-truth run,
    skips the question."""
    return FLOAT8_HARDWARE.applied(lambda original: _target_checked)


def _target_checked(*args: Any) -> None:
    """The hardware question, answered by vramsim's own check of the target."""


def torchao_tinygemm_capability_checked() -> contextlib.AbstractContextManager[None]:
    """torchao's ``Int4TilePackedTo4dTensor.from_hp`` asks ``torch.cuda.get_device_capability()`` for 8.0+
    (tinygemm's tensor cores); vramsim checked the target instead (``workload/quantization/torchao.py``'s ``check_torchao``), so
    while a model is quantized on meta the question gets the least capability tinygemm runs on."""
    from vramsim.tracer.kernels.torchao_int4 import TINYGEMM_CAPABILITY

    return DEVICE_CAPABILITY.applied(lambda original: lambda device=None: TINYGEMM_CAPABILITY)


def quanto_qbits_for_target(create: Callable[..., Any], *, cpu: bool) -> contextlib.ExitStack[bool | None]:
    """optimum-quanto's ``WeightQBitsTensor.create`` picks an int4/int2 weight's subclass by the device it is
    quantized on, and TinyGemm's packing and linear branch on the CPU; while a quanto model is built and traced on
    meta, ``create`` is the target's choice and, for the cpu target, TinyGemm takes its CPU branches
    (``tracer/kernels/quanto_cpu.py``)."""
    from vramsim.tracer.kernels.quanto_cpu import tinygemm_forward_for_cpu, tinygemm_pack_for_cpu

    stack = contextlib.ExitStack()
    stack.enter_context(QUANTO_QBITS_CREATE.applied(lambda original: create))
    if cpu:
        stack.enter_context(QUANTO_TINYGEMM_PACK.applied(lambda original: tinygemm_pack_for_cpu))
        stack.enter_context(QUANTO_TINYGEMM_FORWARD.applied(lambda original: tinygemm_forward_for_cpu))
    return stack


def leftovers() -> list[str]:
    """``module.attribute`` of every vramsim replacement a loaded module (or a patched class) still holds."""
    in_modules = [
        f"{module.__name__}.{name}"
        for module in _modules()
        for name, value in list(vars(module).items())
        if _is_replacement(value)
    ]
    in_classes = [
        f"{p.module}.{p.owner}.{p.attribute}"
        for p in PATCHES
        if p.owner and p.module in sys.modules and _is_replacement(p.current())
    ]
    return in_modules + in_classes


def _marked(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(function)
    def replacement(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    setattr(replacement, _MARK, name)
    return replacement


def _is_replacement(value: Any) -> bool:
    # getattr on arbitrary module globals can run code (lazy proxies); a function's __dict__ cannot.
    return callable(value) and isinstance(getattr(value, "__dict__", None), dict) and _MARK in value.__dict__


def _holders(original: Any, attribute: str) -> list[ModuleType]:
    return [module for module in _modules() if vars(module).get(attribute) is original]


def _references(replacement: Any, holders: list[ModuleType], loaded: set[str]) -> list[tuple[ModuleType, str]]:
    """Where ``replacement`` is held: the ``holders`` it was given to, and modules imported since ``loaded``
    (a module loaded earlier imported its names then; scanning only the new ones keeps the exit fast with
    hundreds of transformers' modules loaded)."""
    imported = [module for name, module in list(sys.modules.items()) if name not in loaded and isinstance(module, ModuleType)]
    return [
        (module, name) for module in [*holders, *imported] for name, value in list(vars(module).items()) if value is replacement
    ]


def _modules() -> list[ModuleType]:
    return [module for module in list(sys.modules.values()) if isinstance(module, ModuleType)]
