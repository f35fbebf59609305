"""Quanto and GGUF denoisers, as diffusers holds and runs them.

Quanto (``QuantoConfig(weights_dtype=...)``): diffusers' own quantizer swaps each linear layer for
optimum-quanto's ``QLinear``; loading sets its weight and calls ``freeze()``, which quantizes it with
quanto's code (int8 or e4m3 data, a scale per output row in the weights' dtype). That code runs here on
meta as on a device; the forward is quanto's ``qbytes_mm``, its default path (the weight upcast to
the activations' dtype and scaled, then a matmul), which meta and CUDA (weight-only) run alike.

GGUF (``GGUFQuantizationConfig(compute_dtype=...)``): diffusers' quantizer swaps each linear layer whose
checkpoint weight is a ``GGUFParameter`` for its ``GGUFLinear``; the parameter holds the quant type's raw
blocks (Q8_0: 34 bytes per 32 values, Q4_K: 144 per 256), and every forward dequantizes the whole
weight with diffusers' torch code, casts it to the compute dtype and multiplies. On meta the blocks are
empty bytes of the same shape; on a real device gguf's own quantizer fills them where it has one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vramsim.errors import UnsupportedError
from vramsim.estimators.devices import get_device
from vramsim.results.report import Assumption
from vramsim.workload.quantization.quanto_packing import QuantoPacking, check_quanto_packing, create_for

if TYPE_CHECKING:  # torch loads when a model is quantized
    import torch

__all__ = [
    "DIFFUSERS_FORMAT_NAMES",
    "GGUF_NAMES",
    "QUANTO_NAMES",
    "check_diffusers_format",
    "describe_diffusers_format",
    "diffusers_format_notes",
    "quantize_diffusers_format",
    "quanto_matmul_traced",
]

QUANTO_NAMES = {"quanto-int8": "int8", "quanto-float8": "float8", "quanto-int4": "int4", "quanto-int2": "int2"}
"""``--quantization`` names -> ``QuantoConfig.weights_dtype``; int4 and int2 weights are packed as quanto packs
them on the target (``quanto_packing.py``)."""
GGUF_NAMES = {"gguf-q8_0": "Q8_0", "gguf-q4_k": "Q4_K"}
"""``--quantization`` names -> the GGUF quant type every linear weight is stored in."""
DIFFUSERS_FORMAT_NAMES = (*QUANTO_NAMES, *GGUF_NAMES)


def _require_library(quanto: bool) -> None:
    """A missing library is one line naming the package, as for torchao's formats."""
    import importlib.util

    module, package = ("optimum.quanto", "optimum-quanto") if quanto else ("gguf", "gguf")
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # optimum itself absent
        found = False
    if not found:
        raise UnsupportedError(f"this format needs {package}: pip install {package}")


def check_diffusers_format(name: str, *, target: str, dtype: torch.dtype) -> None:
    """Refuse, in one line, a missing library and the quanto paths whose kernels differ from the default
    ``qbytes_mm`` traced here."""
    import torch

    _require_library(quanto=name in QUANTO_NAMES)
    if name in ("quanto-int4", "quanto-int2"):
        check_quanto_packing(int(name[-1]), get_device(target), dtype)
    half = dtype in (torch.float16, torch.bfloat16)
    if name == "quanto-int8" and target.lower() == "cpu" and dtype == torch.bfloat16:
        raise UnsupportedError(
            "quanto int8 in bfloat16 on the cpu target runs torch._weight_int8pack_mm, which vramsim does not model; "
            "give dtype=fp32 or a GPU target"
        )
    if name == "quanto-float8" and target.lower() != "cpu" and half:
        raise UnsupportedError(
            "quanto float8 in fp16/bf16 on a GPU runs its Marlin FP8 kernel (MarlinF8QBytesTensor), which vramsim does "
            "not model; simulate the cpu target or fp32"
        )


def quantize_diffusers_format(model: torch.nn.Module, name: str, device: str) -> None:
    """Quantize a diffusers ``model`` in place as ``from_pretrained`` (Quanto) or ``from_single_file`` (GGUF)
    leaves it: the library's layers, each weight loaded into them on ``device``."""
    if name in QUANTO_NAMES:
        _quantize_quanto(model, QUANTO_NAMES[name], device)
    elif name in GGUF_NAMES:
        _quantize_gguf(model, GGUF_NAMES[name], device)
    else:
        raise UnsupportedError(f"{name} is not a diffusers format modelled here; {', '.join(DIFFUSERS_FORMAT_NAMES)} are")


def _linear_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Each linear layer's weight and bias by name: what the checkpoint would load into the swapped layers."""
    import torch

    return {
        f"{name}.{key}": tensor
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
        for key, tensor in module.named_parameters(recurse=False)
    }


def _quantize_quanto(model: torch.nn.Module, weights_dtype: str, device: str) -> None:
    """diffusers' ``QuantoQuantizer``: its layer swap, then ``create_quantized_param`` on each weight (set on the
    device in the model's dtype, then ``freeze()``), the biases loaded as they are."""
    from accelerate.utils import set_module_tensor_to_device  # type: ignore[import-untyped]
    from diffusers.quantizers import DiffusersAutoQuantizer
    from diffusers.quantizers.quantization_config import QuantoConfig
    from optimum.quanto import QModuleMixin

    loaded = _linear_tensors(model)
    quantizer = DiffusersAutoQuantizer.from_config(QuantoConfig(weights_dtype=weights_dtype), pre_quantized=False)
    quantizer.preprocess_model(
        model=model, device_map={"": device}, keep_in_fp32_modules=getattr(model, "_keep_in_fp32_modules", None) or []
    )
    for name, tensor in loaded.items():
        module = model.get_submodule(name.rsplit(".", 1)[0])
        if name.endswith(".weight") and quantizer.check_if_quantized_param(model, tensor, name, {}):
            quantizer.create_quantized_param(model, tensor, name, device, dtype=tensor.dtype)
        elif isinstance(module, QModuleMixin) or name.endswith(".bias"):
            set_module_tensor_to_device(model, name, device, tensor, tensor.dtype)
    loaded.clear()  # diffusers' deprecate() leaves this frame in a reference cycle: the float weights go now, as after loading


def _quantize_gguf(model: torch.nn.Module, quant_type: str, device: str) -> None:
    """diffusers' ``GGUFQuantizer`` over a checkpoint whose linear weights are ``quant_type`` blocks: its swap to
    ``GGUFLinear`` where the state dict holds a ``GGUFParameter``, then ``create_quantized_param`` on each."""
    import gguf
    from accelerate.utils import set_module_tensor_to_device  # type: ignore[import-untyped]
    from diffusers.quantizers import DiffusersAutoQuantizer
    from diffusers.quantizers.gguf.utils import GGUFParameter
    from diffusers.quantizers.quantization_config import GGUFQuantizationConfig

    qtype = gguf.GGMLQuantizationType[quant_type]
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    loaded = _linear_tensors(model)
    dtype = next(t.dtype for t in loaded.values())
    state = {
        name: GGUFParameter(_blocks(tensor, qtype, device), quant_type=qtype)
        for name, tensor in loaded.items()
        if name.endswith(".weight") and tensor.shape[-1] % block == 0  # a converter keeps other rows unquantized
    }
    config = GGUFQuantizationConfig(compute_dtype=dtype)
    quantizer = DiffusersAutoQuantizer.from_config(config, pre_quantized=True)
    quantizer.preprocess_model(
        model=model,
        device_map={"": device},
        keep_in_fp32_modules=getattr(model, "_keep_in_fp32_modules", None) or [],
        state_dict=state,
    )
    for name, tensor in loaded.items():
        if name in state and quantizer.check_if_quantized_param(model, state[name], name, state):
            quantizer.create_quantized_param(model, state[name], name, device)
        else:
            set_module_tensor_to_device(model, name, device, tensor, dtype)
    model.config.quantization_config = config  # type: ignore[union-attr]  # what from_single_file records


def _blocks(weight: torch.Tensor, qtype: Any, device: str) -> torch.Tensor:
    """``weight`` as GGUF stores it in ``qtype``: its raw blocks, one row of bytes per output row (gguf's own
    quantizer where it has one; otherwise random bytes, whose values do not change what memory holds)."""
    import gguf
    import torch

    block, size = gguf.GGML_QUANT_SIZES[qtype]
    shape = (*weight.shape[:-1], weight.shape[-1] // block * size)
    if device == "meta":
        return torch.empty(shape, dtype=torch.uint8, device=device)
    try:
        data = gguf.quants.quantize(weight.detach().float().cpu().numpy(), qtype)
    except NotImplementedError:
        return torch.randint(0, 256, shape, dtype=torch.uint8, device=device)
    return torch.from_numpy(data).to(device, copy=True)  # torch's allocator holds it, as loading a file leaves it


@contextlib.contextmanager
def quanto_matmul_traced(target: str) -> Iterator[None]:
    """quanto's linear calls ``torch.ops.quanto.qbytes_mm``, one custom op to the tracer, which would see its output
    only; while a quanto model is built and traced the op is quanto's own Python body of it
    (``library/qbytes_mm.py``), so the weight it upcasts and scales is traced too, as the real op allocates it. Its
    int4/int2 weights are the subclass quanto makes on ``target`` (``quanto_packing.py``), and on the cpu target
    ``torch.ops.quanto.unpack`` is its C++ extension's ops (``tracer/kernels/quanto_cpu.py``)."""
    _require_library(quanto=True)
    import torch
    from optimum.quanto.library.qbytes_mm import qbytes_mm

    from vramsim.tracer.kernels.quanto_cpu import unpack_cpu
    from vramsim.tracer.patches import quanto_qbits_for_target

    profile = get_device(target)
    cpu = profile.vendor == "cpu"
    namespace = torch.ops.quanto
    bodies = {"qbytes_mm": qbytes_mm, **({"unpack": unpack_cpu} if cpu else {})}
    originals = {name: getattr(namespace, name) for name in bodies}  # an op namespace's attributes are made on lookup
    for name, body in bodies.items():
        setattr(namespace, name, body)
    try:
        with quanto_qbits_for_target(create_for(profile), cpu=cpu):
            yield
    finally:
        for name, original in originals.items():
            setattr(namespace, name, original)


_PACKING_WORDS = {
    QuantoPacking.TINYGEMM: "TinyGemmWeightQBitsTensor (torch's tinygemm int4 layout, a bf16 scale and shift per group "
    "of 128; each linear one _weight_int4pack_mm, its output only; on CUDA, a CUDA 12.1+ torch assumed)",
    QuantoPacking.PLAIN: "WeightQBitsTensor (a uint8 PackedTensor, a scale and shift per group; each linear unpacks "
    "and dequantizes the whole weight, then multiplies)",
}


def _weight_classes(model: torch.nn.Module) -> set[str]:
    return {type(p).__name__ for p in model.parameters()}


def describe_diffusers_format(model: torch.nn.Module) -> str | None:
    """The header's words for a Quanto or GGUF model (None for other models)."""
    config: Any = getattr(getattr(model, "config", None), "quantization_config", None)
    kind = type(config).__name__
    if kind == "QuantoConfig":
        return f"quanto {config.weights_dtype}"
    if kind == "GGUFQuantizationConfig":
        return "GGUF " + next(p.quant_type.name for p in model.parameters() if hasattr(p, "quant_type"))
    return None


def diffusers_format_notes(model: torch.nn.Module) -> list[Assumption]:
    """What a Quanto or GGUF denoiser's run assumed beyond the libraries' own code (none for other models)."""
    config: Any = getattr(getattr(model, "config", None), "quantization_config", None)
    kind = type(config).__name__
    if kind == "QuantoConfig" and config.weights_dtype in ("int4", "int2"):
        detail = f"optimum-quanto {config.weights_dtype} weights, packed as quanto packs them on the target: " + "; ".join(
            _PACKING_WORDS[packing] for packing in QuantoPacking if packing.value in _weight_classes(model)
        )
    elif kind == "QuantoConfig":
        detail = (
            f"optimum-quanto {config.weights_dtype} weights (QLinear frozen as diffusers loads them: a scale per output "
            "row in the weights' dtype); forward through quanto's default qbytes_mm (weight upcast and scaled, then matmul)"
        )
    elif kind == "GGUFQuantizationConfig":
        quant_type = next(p.quant_type.name for p in model.parameters() if hasattr(p, "quant_type"))
        detail = (
            f"GGUF {quant_type} linear weights (GGUFLinear, dequantized whole in each forward by diffusers' torch code; "
            "the CUDA kernels of DIFFUSERS_GGUF_CUDA_KERNELS are not modelled); rows not a multiple of the quant "
            "block, and every other tensor, stay in the model's dtype"
        )
    else:
        return []
    return [Assumption(name="diffusers_quantized_denoiser", detail=detail)]
