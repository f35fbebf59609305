"""Float8 training: torchao's ``convert_to_float8_training`` on the model's linears, as torchtitan's Float8 converter
applies it (``vramsim/workload/float8.py``), and which runs it is modelled for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramsim.config.options import as_is, option
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.devices import get_device

__all__ = ["FLOAT8_CAPABILITY", "FLOAT8_RECIPES", "MATMUL_ALIGNMENT", "Float8Options"]

FLOAT8_RECIPES = ("tensorwise", "rowwise")
"""torchao's ``Float8LinearConfig.from_recipe_name`` names vramsim runs (torchtitan's ``recipe_name``)."""
FLOAT8_CAPABILITY = (8, 9)
"""The first NVIDIA compute capability with float8 tensor cores (Ada sm 8.9, then Hopper sm 9.0): torchao's
float8 training calls ``torch._scaled_mm``, which has no kernel before it; torchtitan refuses below
``has_cuda_capability(8, 9)``."""

MATMUL_ALIGNMENT = 16
"""``torch._scaled_mm`` takes float8 operands whose every dim divides by 16: torchtitan converts a linear only when
both its weight's dims do (``module_filter_fn``), and the weight gradient's matmul runs over the batch's tokens."""


def _float8_flag(text: str) -> str | None:
    return None if text.lower() == "none" else text


@dataclass(kw_only=True)
class Float8Options:
    """Which of torchao's float8 training recipes the model's linears run."""

    float8: str | None = field(
        default=None,
        metadata=option(
            help=f"{'|'.join(FLOAT8_RECIPES)}: train with torchao's Float8Linear (convert_to_float8_training) on "
            "every linear whose dims divide by 16 but the head, as torchtitan's float8 converter with "
            "filter_fqns=['output'] does (vramsim/workload/float8.py); needs float8 matmuls (sm 8.9+ or the cpu target)",
            parse=_float8_flag,
            report=as_is,
        ),
    )

    def check_float8(self, config: Any) -> None:
        """A recipe named must be one, for a training step on a target with float8 matmuls, in a run it is modelled
        for; called once the dtypes are resolved."""
        if self.float8 is None:
            return
        named = str(self.float8).lower()
        if named not in FLOAT8_RECIPES:
            raise ConfigError(f"unknown float8 recipe {self.float8!r}; choose one of: {', '.join(FLOAT8_RECIPES)}")
        self.float8 = named
        if config.task != "train":
            raise ConfigError(f"float8={named!r} is torchao's float8 training; task={config.task!r} takes no step")
        _check_device(config.device)
        tokens = config.batch_size * config.seq_len // config.cp
        if config.inputs is None and tokens % MATMUL_ALIGNMENT:
            raise ConfigError(
                f"float8 needs the tokens of a batch to divide by {MATMUL_ALIGNMENT} (torch._scaled_mm's weight-gradient "
                f"matmul runs over them): batch_size x seq_len is {tokens}"
            )
        others = {
            "mixed_precision (torchao's Float8Linear reads torch's own autocast state; give bf16 weights instead)": (
                config.mixed_precision is not None
            ),
            "lora": config.lora is not None,
            "quantization": config.quantization is not None,
            "compile": config.compile,
            "tp, pp, cp or ep (torchtitan's float8 tensor-parallel styles)": max(config.tp, config.pp, config.cp, config.ep) > 1,
            "device_map": bool(config.device_map),
        }
        named_others = [name for name, on in others.items() if on]
        if named_others:
            raise UnsupportedError(f"float8 with {named_others[0]} is not modelled yet")


def _check_device(device: str) -> None:
    """torch's CPU ``_scaled_mm`` runs float8 matmuls (the cpu target); on a GPU, an NVIDIA one of sm 8.9 or later."""
    profile = get_device(device)
    if profile.vendor == "cpu":
        return
    if profile.vendor != "nvidia":
        raise UnsupportedError(f"float8 training on {profile.name} ({profile.vendor}) is not modelled; NVIDIA sm 8.9+ is")
    capability = profile.compute_capability or (0, 0)
    if capability < FLOAT8_CAPABILITY:
        raise UnsupportedError(
            f"float8 training needs float8 matmuls, and {profile.name} (sm {capability[0]}.{capability[1]}) has none: "
            "Ada (sm 8.9), Hopper (sm 9.0) or later"
        )
