"""GPTQ and AWQ linear layers as gptqmodel holds them on an NVIDIA GPU: its Marlin layers after ``post_init``.

transformers needs the gptqmodel package (and optimum, for GPTQ) to load these checkpoints, and
gptqmodel's layers need its CUDA extension; ``MarlinLinear`` holds exactly the tensors they hold
once loaded, so tracing needs neither. From gptqmodel's ``nn_modules/qlinear/marlin.py``
(``MarlinLinear``) and ``marlin_awq.py`` (``AwqMarlinLinear``), with ``in``/``out`` the layer's
features, ``b`` the bits, ``pack = 32 // b`` and ``groups = in // group_size`` (1 for -1):

- GPTQ: ``qweight`` int32 [in / pack, out], repacked for Marlin in place of the checkpoint's
  (``gptq_marlin_repack``, the same bytes); ``scales`` [groups, out] in the compute dtype;
  ``qzeros`` replaced by an empty tensor (symmetric: no zeros); ``g_idx`` empty, or with act order
  (``desc_act``) int32 [in] sorted plus ``g_idx_sort_indices`` int32 [in];
- AWQ: ``qweight`` int32 [in, out / pack] and ``qzeros`` int32 [groups, out / pack], repacked
  (``awq_marlin_repack``, ``awq_to_marlin_zero_points``, the same bytes); ``scales`` as GPTQ's;
  ``g_idx`` and ``g_idx_sort_indices`` empty;
- both: ``workspace`` int32 [max(SMs, 128)] per layer (``marlin_make_workspace_new``) and the bias
  as a buffer in the compute dtype. Empty tensors hold no memory and are left out.

Which linear layers are swapped is the loaders' own rule: for GPTQ, optimum's (``convert_model``:
``nn.Linear`` and ``Conv1D`` under the decoder blocks, found by ``BLOCK_PATTERNS``); for AWQ,
transformers' (``replace_with_awq_linear``: every ``nn.Linear`` but ``modules_to_not_convert``
and the quantizer's default skips, the head among them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from vramsim.errors import UnsupportedError

__all__ = ["MarlinFormat", "MarlinLinear", "quantized_layers", "swap_marlin_layers"]

MARLIN_MIN_WORKSPACE = 128
"""``marlin_make_workspace_new``: ``max(sms * max_blocks_per_sm, 128)`` int32 entries."""
MARLIN_OUT_FEATURES_MULTIPLE = 64
"""``SUPPORTS_OUT_FEATURES_DIVISIBLE_BY = [64]`` of both Marlin layers (``min_thread_n``)."""
BLOCK_PATTERNS = (
    "transformer.h",
    "model.decoder.layers",
    "gpt_neox.layers",
    "model.layers",
    "model.language_model.layers",
    "h",
    "decoder.layers",
    "layers",
)
"""optimum/gptq/constants.py ``BLOCK_PATTERNS``: where optimum looks for the decoder blocks it quantizes."""


@dataclass(frozen=True, slots=True)
class MarlinFormat:
    """What a GPTQ or AWQ checkpoint's config fixes about its layers."""

    method: str
    """``"gptq"`` or ``"awq"``."""
    bits: int
    group_size: int
    desc_act: bool = False
    """GPTQ's act order: the input permuted by ``g_idx`` before each GEMM."""


class MarlinLinear(nn.Module):
    """One linear layer in gptqmodel's Marlin format (see the module docstring for its tensors)."""

    def __init__(
        self,
        fmt: MarlinFormat,
        in_features: int,
        out_features: int,
        *,
        bias: bool,
        dtype: torch.dtype,
        sms: int,
        device: torch.device | str = "meta",
    ) -> None:
        super().__init__()
        self.in_features, self.out_features, self.act_order = in_features, out_features, fmt.desc_act
        pack = 32 // fmt.bits
        groups = in_features // fmt.group_size if fmt.group_size != -1 else 1

        def frozen(*shape: int, dtype: torch.dtype = torch.int32) -> nn.Parameter:
            return nn.Parameter(torch.empty(shape, dtype=dtype, device=device), requires_grad=False)

        gptq = fmt.method == "gptq"
        self.qweight = frozen(in_features // pack, out_features) if gptq else frozen(in_features, out_features // pack)
        self.scales = frozen(groups, out_features, dtype=dtype)
        if not gptq:
            self.qzeros = frozen(groups, out_features // pack)
        if self.act_order:
            self.g_idx = frozen(in_features)
            self.register_buffer(
                "g_idx_sort_indices", torch.empty(in_features, dtype=torch.int32, device=device), persistent=False
            )
        self.register_buffer(
            "workspace", torch.zeros(max(sms, MARLIN_MIN_WORKSPACE), dtype=torch.int32, device=device), persistent=False
        )
        self.register_buffer("bias", torch.empty(out_features, dtype=dtype, device=device) if bias else None)
        # A parameter count is of the values a layer stands for: its weight and bias, held by qweight.
        self.qweight.logical_numel = in_features * out_features + (out_features if bias else 0)  # type: ignore[attr-defined]
        for metadata in (p for p in self.parameters() if p is not self.qweight):
            metadata.logical_numel = 0  # type: ignore[attr-defined]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # apply_gptq_marlin_linear / apply_awq_marlin_linear
        out = torch.ops.vramsim.marlin_gemm(rows, self.qweight, self.scales, self.workspace, self.out_features, self.act_order)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, act_order={self.act_order}"


def swap_marlin_layers(model: nn.Module, fmt: MarlinFormat, skip: list[str], *, sms: int) -> None:
    """Replace the layers the loader would quantize with ``MarlinLinear``s on meta, in place; ``skip``
    lists module names left unquantized (AWQ's ``modules_to_not_convert`` and default skips)."""
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    for name, in_features, out_features, bias in quantized_layers(model, fmt, skip):
        _check_shape(name, in_features, out_features, fmt)
        swapped = MarlinLinear(fmt, in_features, out_features, bias=bias, dtype=dtype, sms=sms)
        model.set_submodule(name, swapped)


def quantized_layers(model: nn.Module, fmt: MarlinFormat, skip: list[str]) -> list[tuple[str, int, int, bool]]:
    """``(name, in_features, out_features, has_bias)`` of each layer the loader quantizes: for GPTQ optimum's
    choice (linear layers under the decoder blocks), for AWQ transformers' (every linear layer not skipped)."""
    from transformers.pytorch_utils import Conv1D
    from transformers.quantizers.quantizers_utils import should_convert_module

    names = [name for name, _ in model.named_modules()]
    block = next((p for p in BLOCK_PATTERNS if any(n.startswith(p) for n in names)), None) if fmt.method == "gptq" else ""
    if block is None:
        raise UnsupportedError(
            f"GPTQ quantizes the decoder blocks, which optimum finds by name ({', '.join(BLOCK_PATTERNS)}); "
            f"{type(model).__name__} has none of them"
        )
    found = []
    for name, layer in model.named_modules():
        if type(layer) is nn.Linear:
            in_features, out_features = layer.in_features, layer.out_features
        elif isinstance(layer, Conv1D):
            in_features, out_features = layer.weight.shape
        else:
            continue
        if name.startswith(block) and should_convert_module(name, skip):
            found.append((name, in_features, out_features, layer.bias is not None))
    return found


def _check_shape(name: str, in_features: int, out_features: int, fmt: MarlinFormat) -> None:
    """gptqmodel's Marlin layers take these shapes only (``SUPPORTS_*_DIVISIBLE_BY``, whole groups)."""
    pack = 32 // fmt.bits
    if (
        out_features % MARLIN_OUT_FEATURES_MULTIPLE
        or (fmt.group_size != -1 and in_features % fmt.group_size)
        or in_features % pack
    ):
        raise UnsupportedError(
            f"{name} ({in_features} -> {out_features}) does not fit gptqmodel's Marlin kernel: it needs out_features a "
            f"multiple of {MARLIN_OUT_FEATURES_MULTIPLE} and in_features a multiple of the group size {fmt.group_size}"
        )
