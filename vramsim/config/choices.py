"""The names options are checked against, which the workload also builds by: optimizers, quantizations, losses.

They live here, below the workload, so that the config checks a name without importing what builds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import TORCHTUNE_OUTPUT_CHUNKS

__all__ = [
    "LOSSES",
    "OPTIMIZERS",
    "OPTIMIZER_ALIASES",
    "QUANTIZATIONS",
    "NamedLoss",
    "canonical_optimizer",
    "parse_loss",
]

OPTIMIZERS = (
    "adamw",
    "adamw-foreach",
    "adam",
    "sgd",
    "adafactor",
    "adamw8bit",
    "paged-adamw8bit",
    "paged-adamw32bit",
    "muon",
    "lion",
)
"""Every named optimizer, by its short name (vramsim/workload/optimizers.py builds each)."""

OPTIMIZER_ALIASES = {
    "adamw-fused": "adamw",
    "adamw_torch_fused": "adamw",
    "adamw_torch": "adamw-foreach",
    "adamw_bnb_8bit": "adamw8bit",
    "adamw_8bit": "adamw8bit",
    "lion_32bit": "lion",
    "paged_adamw_8bit": "paged-adamw8bit",
    "paged_adamw8bit": "paged-adamw8bit",
    "paged_adamw_32bit": "paged-adamw32bit",
}
"""Other names of the same optimizers: explicit spellings and transformers' ``optim`` names."""

QUANTIZATIONS = (
    "nf4",
    "nf4-dq",
    "fp4",
    "fp4-dq",
    "int8",
    "gptq",
    "awq",
    "fp8",
    "fp8-rowwise",
    "int8wo",
    "int4wo",
    "int4wo-tinygemm",
    "quanto-int8",
    "quanto-float8",
    "quanto-int4",
    "quanto-int2",
    "gguf-q8_0",
    "gguf-q4_k",
)
"""The ``--quantization`` names (vramsim/workload/quantization/weights.py quantizes each; the quanto and gguf ones,
diffusers denoisers only, vramsim/workload/quantization/diffusers_formats.py)."""

LOSSES = ("model", "liger-flce", "chunked-ce[:N]")
"""The loss names ``--loss`` takes besides ``path/to/file.py:function``."""


def canonical_optimizer(name: str) -> str | None:
    """The short name ``name`` stands for, or None when it names no optimizer."""
    name = name.lower()
    name = OPTIMIZER_ALIASES.get(name, name)
    return name if name in OPTIMIZERS else None


@dataclass(frozen=True, slots=True)
class NamedLoss:
    """One of ``LOSSES`` other than the model's own."""

    kind: str
    """``liger-flce`` or ``chunked-ce``."""
    chunks: int = TORCHTUNE_OUTPUT_CHUNKS
    """``chunked-ce``: the sequence's chunks (``num_output_chunks``)."""

    @property
    def spec(self) -> str:
        return f"chunked-ce:{self.chunks}" if self.kind == "chunked-ce" else self.kind


def parse_loss(text: str) -> NamedLoss | None:
    """``model`` -> None (the model's own loss); ``liger-flce``; ``chunked-ce`` or ``chunked-ce:N``."""
    name, _, count = text.strip().lower().partition(":")
    if name == "model" and not count:
        return None
    if name == "liger-flce" and not count:
        return NamedLoss("liger-flce")
    if name == "chunked-ce":
        if not count:
            return NamedLoss("chunked-ce")
        if count.isdigit() and 1 <= int(count) <= 1024:
            return NamedLoss("chunked-ce", int(count))
        raise ConfigError(f"chunked-ce:N takes 1 to 1024 chunks, got {count!r}")
    raise ConfigError(f"unknown loss {text!r}; choose one of: {', '.join(LOSSES)}, or path/to/file.py:function")
