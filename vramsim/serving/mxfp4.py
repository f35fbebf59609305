"""Which MoE backend vLLM runs MXFP4 experts (gpt-oss) on, and how it pads the experts it creates for it.

``Mxfp4MoEMethod.create_weights`` (``vllm/model_executor/layers/quantization/mxfp4.py``, 0.10.1 to 0.18; from 0.19
the oracle's ``mxfp4_round_up_hidden_size_and_intermediate_size`` in ``vllm/model_executor/layers/fused_moe/oracle/
mxfp4.py``) pads the intermediate size per partition, and on some backends the hidden size, before it allocates
``w13_weight`` / ``w2_weight``, their E8M0 scales and the bf16 ``w13_bias`` / ``w2_bias``, all at the padded
shape; the backend is chosen from the device's compute capability (``_should_use_marlin`` in 0.10.1,
``get_mxfp4_backend`` from 0.10.2, ``select_mxfp4_moe_backend`` in the oracle, 0.19). Read as vLLM chooses by default
(no ``VLLM_MXFP4_USE_MARLIN`` or FlashInfer variables, no LoRA), with FlashInfer and ``triton_kernels`` installed:
FlashInfer is a dependency from 0.12 and ``triton_kernels`` is vendored from 0.12 (``vllm.third_party``); before
that they are taken as installed (an llm-d study on ``vllm/vllm-openai:v0.11.0`` logs gpt-oss-120b's weights at
64.38 GiB on an H100, as vllm#33155 logs them on 0.14.1's Triton backend, where Marlin's padding would hold 65.90
GiB); a 0.10.2 to 0.11 install without ``triton_kernels`` runs Marlin on Hopper, not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from vramsim.errors import UnsupportedError
from vramsim.serving.versions import vllm_release

__all__ = ["MXFP4_MIN_CAPABILITY", "Mxfp4Layout", "mxfp4_layout", "mxfp4_stored_bytes"]

Mxfp4Backend = Literal["marlin", "triton", "flashinfer-trtllm"]

MXFP4_BLOCK = 32
"""Elements per MXFP4 block: 32 four-bit values (16 bytes) share one uint8 E8M0 scale (OCP MX spec; vLLM's
``Mxfp4MoEMethod.create_weights``: ``mxfp4_block = 32``)."""

MXFP4_BIAS_BYTES = 2
"""``create_weights`` allocates ``w13_bias`` and ``w2_bias`` in ``torch.bfloat16`` (Marlin's conversion keeps them
in the model's dtype: ``prepare_moe_fp4_layer_for_marlin``, ``marlin_permute_bias``)."""

MXFP4_MIN_CAPABILITY = (8, 0)
"""``Mxfp4Config.get_min_capability`` returns 80 in every release read (0.10.1 to 0.19.0): vLLM refuses MXFP4 below."""

MARLIN_INTERMEDIATE_MULTIPLE = 128
"""Marlin's MoE kernel needs n % 256 == 0 and k % 128 == 0 per GEMM (the comment in ``create_weights``): the
intermediate size per partition is rounded up to 128 (``round_up(intermediate_size_per_partition, 128)``) in
``Mxfp4MoEMethod.create_weights`` (0.10.1 to 0.18) and in the oracle's
``mxfp4_round_up_hidden_size_and_intermediate_size`` (0.19). Marlin's repack after loading
(``prepare_moe_fp4_layer_for_marlin``) keeps the bytes: int32 words of eight 4-bit values, E8M0 scales of one
byte, permuted bf16 biases; its int32 workspace (SMs x 4 words per layer) is not counted."""

MARLIN_HIDDEN_MULTIPLE = 256
"""On Marlin the hidden size is rounded up to 256 (``round_up(hidden_size, 256)``; XPU's 128 is not modelled), in
the same two places: gpt-oss's 2880 becomes 3072, padding ``w13``'s columns and ``w2``'s rows, scales and bias."""

TRITON_INTERMEDIATE_MULTIPLE = 64
"""The CUDA default branch (the Triton backend, ``triton_kernels``): ``round_up(intermediate_size_per_partition,
64)``, the hidden size not padded; the swizzled layout Triton makes after loading is not modelled."""

FLASHINFER_TRTLLM_MULTIPLE = 256
"""FlashInfer's TRT-LLM MXFP4 backends (SM100 with FlashInfer: BF16 activations by default) round both the
intermediate and the hidden size up to 256 ("to hold non-uniform sharded tensor as well as swizzling")."""

TORCH_2_8_VLLM = (0, 10, 2)
"""The first release pinning torch 2.8 (0.10.1 and 0.10.1.1 pin torch 2.7.1): before it ``_should_use_marlin`` takes
Marlin on every CUDA device but SM100 (``not is_torch_equal_or_newer("2.8.0")``), Hopper included, as vllm#23278's
H100 log shows (``marlin_utils_fp4.py``'s weight-only FP4 warning)."""

TRITON_CAPABILITY_CAP_VLLM = (0, 12)
"""From 0.12 ``triton_kernels`` is taken only on ``(9, 0) <= capability < (11, 0)`` ("only confirmed to work on
SM90 and SM100", ``get_mxfp4_backend``); 0.10.2 to 0.11 take it from major 9 up, SM120 included."""


LORA_BACKEND_VLLM = (0, 11, 1)
"""The first release with ``get_mxfp4_backend_with_lora`` (MXFP4 MoE with LoRA): it returns Marlin on CUDA (from
0.12 Triton only where ``envs.VLLM_MXFP4_USE_MARLIN is False``, i.e. set to 0, so Marlin by default)."""


@dataclass(frozen=True, slots=True)
class Mxfp4Layout:
    """The backend vLLM runs the MXFP4 experts on and the multiples ``create_weights`` pads to (1: not padded)."""

    backend: Mxfp4Backend
    intermediate_multiple: int
    hidden_multiple: int


_LAYOUTS = {
    "marlin": Mxfp4Layout("marlin", MARLIN_INTERMEDIATE_MULTIPLE, MARLIN_HIDDEN_MULTIPLE),
    "triton": Mxfp4Layout("triton", TRITON_INTERMEDIATE_MULTIPLE, 1),
    "flashinfer-trtllm": Mxfp4Layout("flashinfer-trtllm", FLASHINFER_TRTLLM_MULTIPLE, FLASHINFER_TRTLLM_MULTIPLE),
}


def mxfp4_layout(version: str, vendor: str, capability: tuple[int, int] | None, *, lora: bool = False) -> Mxfp4Layout:
    """The MXFP4 MoE backend vLLM ``version`` picks by default on a device of ``capability``: Marlin below Hopper
    (no FP4), on Hopper before torch 2.8 (0.10.1), on SM120 outside 0.10.2 to 0.11 and with ``lora`` from 0.11.1
    (``get_mxfp4_backend_with_lora``: Triton only when ``VLLM_MXFP4_USE_MARLIN`` is set to 0); FlashInfer's TRT-LLM
    kernels on SM100 (``is_device_capability(100)``, then its family from 0.13); Triton otherwise. A ROCm device is
    counted as CUDA's Triton layout (its ``get_padding_alignment`` is not modelled)."""
    vllm_release(version)  # a bad or V0 version is refused first
    if vendor == "amd":
        return _LAYOUTS["triton"]
    if vendor != "nvidia" or capability is None or capability < MXFP4_MIN_CAPABILITY:
        raise UnsupportedError(
            "vLLM serves MXFP4 on NVIDIA GPUs of compute capability 8.0+ (Mxfp4Config.get_min_capability) and on ROCm"
        )
    numbers = _numbers(version)
    if lora and numbers >= LORA_BACKEND_VLLM:
        return _LAYOUTS["marlin"]
    if capability[0] == 10 and (capability == (10, 0) or numbers[:2] >= (0, 13)):
        return _LAYOUTS["flashinfer-trtllm"]
    if capability[0] < 9 or numbers < TORCH_2_8_VLLM:
        return _LAYOUTS["marlin"]
    if capability >= (11, 0) and numbers[:2] >= TRITON_CAPABILITY_CAP_VLLM:
        return _LAYOUTS["marlin"]
    return _LAYOUTS["triton"]


def mxfp4_stored_bytes(module: torch.nn.Module, layout: Mxfp4Layout, rounded: int) -> tuple[int, int]:
    """``(held, stored)``: the bytes of ``module``'s own fused expert tensors as the trace holds them (3-D weights
    ``experts x {hidden, 2 x intermediate}`` or ``{hidden, intermediate}`` in either order, 2-D biases), and as
    ``create_weights`` allocates them under ``layout``: uint8 blocks of two values per byte plus one uint8 scale
    per 32 values, bf16 biases, every dimension padded; each tensor in allocator blocks of ``rounded`` bytes."""
    hidden, intermediate = _expert_sizes(module)
    padded_hidden = _round_up(hidden, layout.hidden_multiple)
    padded_intermediate = _round_up(intermediate, layout.intermediate_multiple)
    held = stored = 0
    for tensor in module.parameters(recurse=False):
        held += _blocks(tensor.numel() * tensor.element_size(), rounded)
        experts, *dims = tensor.shape
        if tensor.dim() == 3:
            other = dims[1] if dims[0] == hidden else dims[0]
            rows = 2 * padded_intermediate if other == 2 * intermediate else padded_intermediate
            values = experts * rows * padded_hidden
            stored += _blocks(values // 2, rounded) + _blocks(values // MXFP4_BLOCK, rounded)
        else:  # a bias: the gate-up's (experts, 2 x intermediate) or the down's (experts, hidden)
            width = 2 * padded_intermediate if dims[0] == 2 * intermediate else padded_hidden
            stored += _blocks(experts * width * MXFP4_BIAS_BYTES, rounded)
    return held, stored


def _expert_sizes(module: torch.nn.Module) -> tuple[int, int]:
    """The hidden and intermediate sizes of a fused experts module (gpt-oss's ``hidden_size``/``intermediate_size``,
    the other fused experts' ``hidden_dim``/``intermediate_dim``): the rank's shard, as ``rank_config`` built it."""
    hidden = getattr(module, "hidden_size", None) or getattr(module, "hidden_dim", None)
    intermediate = getattr(module, "intermediate_size", None) or getattr(module, "intermediate_dim", None)
    if not isinstance(hidden, int) or not isinstance(intermediate, int):
        raise UnsupportedError(f"MXFP4 experts in {type(module).__name__}: its hidden and intermediate sizes are not named")
    return hidden, intermediate


def _numbers(version: str) -> tuple[int, int, int]:
    parts = [*version.strip().removeprefix("v").split("."), "0"]
    patch = parts[2].split("rc")[0].split("+")[0]
    return int(parts[0]), int(parts[1]), int(patch) if patch.isdigit() else 0


def _round_up(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


def _blocks(nbytes: int, rounded: int) -> int:
    return -(-nbytes // rounded) * rounded
