"""GPTQ and AWQ bases as gptqmodel trains them under a LoRA adapter (peft's ``GPTQLoraLinear``, ``AwqLoraLinear``).

gptqmodel's Marlin layers refuse training (``SUPPORTS_TRAINING = False``; ``BaseQuantLinear.train`` raises), so a
LoRA run loads its base with a kernel that trains; these layers hold and run what those hold and run (gptqmodel
7.7, ``nn_modules/qlinear``), with ``in``/``out`` the layer's features, ``pack = 32 // bits`` and ``groups`` the
input groups:

- GPTQ, ``TritonV2QuantLinear`` (``tritonv2.py``), whose ``forward`` in training mode is ``TorchQuantLinear``'s
  (``torch.py`` ``_forward_eager``): ``qweight`` int32 [in / pack, out], ``qzeros`` int32 [groups, out / pack],
  ``scales`` [groups, out], ``g_idx`` int32 [in]; each forward dequantizes the whole weight, [in, out] in the
  scales' dtype (Triton's dequant kernel), casts it to the input's dtype if they differ, and runs
  ``torch.matmul(x, weights)``, so autograd keeps the dequantized weight for the input's gradient: it lives from
  the layer's forward to its backward, like an activation.
- AWQ, ``AwqGEMMLinear`` (``gemm_awq.py``): ``qweight`` int32 [in, out / pack], ``qzeros`` int32
  [groups, out / pack], ``scales`` [groups, out]; its autograd function keeps only those. Forward: above
  ``AWQ_DEQUANT_ROWS`` rows the weight is dequantized to [in, out] and multiplied, else the fused GEMM writes
  ``AWQ_SPLIT_K`` float32 partial outputs and reduces them (``gemm_cuda_gen.cu``, ``fp32_accum``); backward
  dequantizes the weight again for the input's gradient.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vramsim.workload.quantization.marlin import MarlinFormat, quantized_layers

__all__ = [
    "AWQ_DEQUANT_ROWS",
    "AWQ_SPLIT_K",
    "QUANTIZED_TRAINING_LAYERS",
    "AwqTrainingLinear",
    "GptqTrainingLinear",
    "lora_dispatch",
    "swap_training_layers",
]

AWQ_DEQUANT_ROWS = 1024
"""``AwqGemmFn.forward``: ``rows > 1024`` dequantizes the weight and runs a dense matmul (gemm_awq.py)."""
AWQ_SPLIT_K = 8
"""``AwqGemmFn.forward`` calls the fused GEMM with ``split_k_iters=8``: that many float32 partial outputs."""


class _QuantizedTraining(nn.Module):
    """The packed tensors a gptqmodel layer holds, frozen; the parameter count is of the values they stand for."""

    def __init__(self, fmt: MarlinFormat, in_features: int, out_features: int, *, bias: bool, dtype: torch.dtype) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        pack = 32 // fmt.bits
        groups = in_features // fmt.group_size if fmt.group_size != -1 else 1

        def frozen(*shape: int, dtype: torch.dtype = torch.int32) -> nn.Parameter:
            return nn.Parameter(torch.empty(shape, dtype=dtype, device="meta"), requires_grad=False)

        gptq = fmt.method == "gptq"
        self.qweight = frozen(in_features // pack, out_features) if gptq else frozen(in_features, out_features // pack)
        self.qzeros = frozen(groups, out_features // pack)
        self.scales = frozen(groups, out_features, dtype=dtype)
        if gptq:
            self.g_idx = frozen(in_features)
        self.register_buffer("bias", torch.empty(out_features, dtype=dtype, device="meta") if bias else None)
        self.qweight.logical_numel = in_features * out_features + (out_features if bias else 0)  # type: ignore[attr-defined]
        for metadata in (p for p in self.parameters() if p is not self.qweight):
            metadata.logical_numel = 0  # type: ignore[attr-defined]

    @property
    def infeatures(self) -> int:
        """peft reads a quantized layer's shape as ``infeatures``/``outfeatures`` (``_get_in_out_features``) where it
        does not recognise gptqmodel's class, which needs its CUDA package."""
        return self.in_features

    @property
    def outfeatures(self) -> int:
        return self.out_features

    def _dequantized(self, like: torch.Tensor) -> torch.Tensor:
        """The whole weight [in, out] in the scales' dtype, then in ``like``'s dtype (a copy if they differ)."""
        weights = self.scales.new_empty((self.in_features, self.out_features), device=like.device)
        return weights if weights.dtype == like.dtype else weights.to(like.dtype)

    def _biased(self, out: torch.Tensor) -> torch.Tensor:
        bias = self.bias
        return out + bias if isinstance(bias, torch.Tensor) else out

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


class GptqTrainingLinear(_QuantizedTraining):
    """A GPTQ layer as gptqmodel's Triton/torch layers run in training mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        return self._biased(torch.matmul(rows, self._dequantized(rows)).reshape(*x.shape[:-1], self.out_features))


class AwqTrainingLinear(_QuantizedTraining):
    """An AWQ layer as gptqmodel's ``AwqGEMMLinear`` runs in training mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        return self._biased(_AwqGemm.apply(rows, self).reshape(*x.shape[:-1], self.out_features))


class _AwqGemm(torch.autograd.Function):
    """``AwqGemmFn``: the packed weight kept, dequantized again for the input's gradient."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor, layer: AwqTrainingLinear) -> torch.Tensor:  # type: ignore[override]
        ctx.layer = layer
        if rows.shape[0] > AWQ_DEQUANT_ROWS:
            return torch.matmul(rows, layer._dequantized(rows))
        partials = rows.new_empty((AWQ_SPLIT_K, rows.shape[0], layer.out_features), dtype=torch.float32)
        out = rows.new_empty((rows.shape[0], layer.out_features))  # the fused split-K reduce writes it once
        del partials
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:  # type: ignore[override]
        if not ctx.needs_input_grad[0]:
            return None, None
        weights = ctx.layer._dequantized(grad)
        return torch.matmul(grad, weights.transpose(-1, -2)), None


QUANTIZED_TRAINING_LAYERS = (GptqTrainingLinear, AwqTrainingLinear)


def swap_training_layers(model: nn.Module, fmt: MarlinFormat, skip: list[str]) -> None:
    """Replace the layers the loader quantizes with the training layers of ``fmt``'s method, on meta, in place."""
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    layer = GptqTrainingLinear if fmt.method == "gptq" else AwqTrainingLinear
    for name, in_features, out_features, bias in quantized_layers(model, fmt, skip):
        model.set_submodule(name, layer(fmt, in_features, out_features, bias=bias, dtype=dtype))


def lora_dispatch(config: Any) -> None:
    """Give peft's LoRA config the layers it wraps for gptqmodel's (``dispatch_gptq``/``dispatch_awq`` match
    gptqmodel's own classes, which need its CUDA package)."""
    from peft.tuners.lora.awq import AwqLoraLinear
    from peft.tuners.lora.gptq import GPTQLoraLinear

    config._register_custom_module({GptqTrainingLinear: GPTQLoraLinear, AwqTrainingLinear: AwqLoraLinear})
