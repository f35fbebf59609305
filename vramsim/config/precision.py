"""The dtypes: the weights', and autocast's around the forward pass."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vramsim.config.options import option
from vramsim.config.recipes import RECIPE_DEFAULT
from vramsim.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["PrecisionOptions"]

_DTYPE_NAMES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
_MIXED_NAMES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}
"""The dtype names taken, as torch's attribute names: the command line parses its arguments without torch."""


def _dtype_name(value: torch.dtype | None) -> str | None:
    return str(value).removeprefix("torch.") if value else None


def _mixed_flag(text: str) -> str | None:
    """``--mixed-precision``: a dtype name, or ``no`` for no autocast (under a recipe that autocasts)."""
    return None if text.lower() in ("no", "none") else text


@dataclass(kw_only=True)
class PrecisionOptions:
    """The weights' dtype and the forward's autocast dtype, given by name or as torch dtypes."""

    dtype: torch.dtype | str | None = field(
        default=None,
        metadata=option(
            help="weight dtype: fp32, bf16, fp16; none given: what the installed transformers' from_pretrained loads "
            "with none passed (5: the config's dtype; 4 trains float32), float32 where the config names none",
            report=_dtype_name,
        ),
    )
    mixed_precision: torch.dtype | str | None = field(
        default=RECIPE_DEFAULT,
        metadata=option(
            help="autocast dtype (bf16 or fp16) around the forward pass, or no; weights stay in --dtype; none given: "
            "the recipe's (the Trainer's: no)",
            parse=_mixed_flag,
            report=_dtype_name,
        ),
    )

    def check_precision(self) -> None:
        """A dtype name must be one taken; checked without torch, so that a bad argument is answered at once."""
        for name, names in (("dtype", _DTYPE_NAMES), ("mixed_precision", _MIXED_NAMES)):
            value = getattr(self, name)
            if isinstance(value, str) and value.lower().removeprefix("torch.") not in names:
                raise ConfigError(f"unsupported {name}={value!r}; choose one of: {', '.join(names)}")

    def resolve_precision(self) -> None:
        """A dtype name becomes its torch dtype: torch loads here, the last step of the checks."""
        self.dtype = _dtype("dtype", self.dtype, _DTYPE_NAMES)
        self.mixed_precision = _dtype("mixed_precision", self.mixed_precision, _MIXED_NAMES)


def __getattr__(name: str) -> Any:
    """``DTYPES`` and ``MIXED_PRECISION``: the names taken -> torch dtypes, made when first read (torch loads then)."""
    if name in ("DTYPES", "MIXED_PRECISION"):
        return _torch_dtypes(_DTYPE_NAMES if name == "DTYPES" else _MIXED_NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _torch_dtypes(names: dict[str, str]) -> dict[str, torch.dtype]:
    import torch

    return {name: getattr(torch, attr) for name, attr in names.items()}


def _dtype(name: str, value: Any, names: dict[str, str]) -> torch.dtype | None:
    if value is None:
        return None
    import torch

    choices = _torch_dtypes(names)
    if isinstance(value, torch.dtype) and value in choices.values():
        return value
    if isinstance(value, str) and value.lower().removeprefix("torch.") in choices:
        return choices[value.lower().removeprefix("torch.")]
    raise ConfigError(f"unsupported {name}={value!r}; choose one of: {', '.join(choices)}")
