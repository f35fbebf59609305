"""Quantized weights and LoRA adapters: what the base model is stored in, and what trains on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramsim.config.checks import check_count
from vramsim.config.choices import QUANTIZATIONS
from vramsim.config.options import option
from vramsim.errors import ConfigError

__all__ = ["QuantizationOptions", "lora_of_rank"]


def lora_of_rank(
    rank: int, targets: str = "all-linear", *, alpha: float | None = None, dropout: float = 0.0, dora: bool = False
) -> dict[str, Any]:
    """peft ``LoraConfig`` arguments for a LoRA of rank ``rank``: alpha 2r unless given, on every linear
    layer but the output head (peft's own ``"all-linear"``) unless ``targets`` names modules
    (comma-separated), DoRA with ``dora`` (``use_dora=True``); ``lora=16`` and ``--lora-rank 16`` both mean
    the defaults."""
    config: dict[str, Any] = {
        "r": rank,
        "lora_alpha": 2 * rank if alpha is None else alpha,
        "target_modules": targets if targets == "all-linear" else targets.split(","),
    }
    if dropout:
        config["lora_dropout"] = dropout
    if dora:
        config["use_dora"] = True
    return config


@dataclass(kw_only=True)
class QuantizationOptions:
    """The base model's quantized format and the LoRA adapters trained on it."""

    lora: Any = field(
        default=None,
        metadata=option(
            help="train LoRA adapters of this rank (peft; Python: the rank, a peft.LoraConfig or a dict of its arguments)",
            flag="--lora-rank",
            parse=int,
            report=lambda value: value is not None,
        ),
    )
    quantization: Any = field(
        default=None,
        metadata=option(
            help=f"quantized weights: {', '.join(QUANTIZATIONS)} (bitsandbytes 4-bit, QLoRA's base; -dq: double "
            "quantization; int8: LLM.int8; gptq/awq: 4-bit, group 128, gptqmodel's Marlin kernel; fp8: e4m3 weights in "
            "128x128 blocks, sm 8.9+; fp8-rowwise: torchao float8 per row; int8wo, int4wo: torchao int8/int4 weight-only "
            "(int4wo: mslk's sm90 kernel; int4wo-tinygemm: torch's tinygemm, sm 8.0+); "
            "the torchao ones need torchao; quanto-int8, quanto-float8, quanto-int4, quanto-int2: optimum-quanto (int4/int2 "
            "packed as quanto packs them on the target), gguf-q8_0, gguf-q4_k: GGUF, "
            "diffusers denoisers only), quantized by the library itself "
            "(vramsim/workload/quantization/weights.py; Python: also transformers' BitsAndBytesConfig, GPTQConfig, AwqConfig, "
            "FineGrainedFP8Config, TorchAoConfig)",
            report=lambda value: value if isinstance(value, str) or value is None else type(value).__name__,
        ),
    )

    def check_quantization(self) -> None:
        """A LoRA rank becomes peft's arguments; a quantization name must be one vramsim quantizes by."""
        if isinstance(self.lora, int) and not isinstance(self.lora, bool):
            check_count("lora", self.lora, 1 << 16)
            self.lora = lora_of_rank(self.lora)
        if isinstance(self.quantization, str) and self.quantization.lower() not in QUANTIZATIONS:
            raise ConfigError(f"unknown quantization {self.quantization!r}; choose one of: {', '.join(QUANTIZATIONS)}")
