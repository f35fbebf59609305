"""torchao's float8 training on a model's linears, as torchtitan's float8 converter applies it.

``convert_to_float8_training`` swaps each chosen ``nn.Linear`` for torchao's ``Float8Linear``, whose
``matmul_with_hp_or_float8_args`` autograd function saves the high-precision input and weight for
backward and casts them (and the output's gradient) to float8 with dynamic scales around each of the
three ``torch._scaled_mm`` calls: e4m3 for the input and weight, e5m2 for the gradient; one float32
scale per tensor (``tensorwise``) or per row (``rowwise``). All of it is torchao's code run on meta,
its ``Float8TrainingTensor`` ops seen by the tracer (``tracer/mode.py``).

Which linears: torchtitan's ``module_filter_fn`` (both dims divisible by 16) with its llama configs'
``filter_fqns = ["output"]``, the head, which transformers names ``lm_head`` (``HEAD_MODULES``).
"""

from __future__ import annotations

import torch

from vramsim.config.float8 import MATMUL_ALIGNMENT
from vramsim.workload.quiet import quiet_optional_libraries

__all__ = ["HEAD_MODULES", "convert_to_float8", "float8_linears"]

HEAD_MODULES = ("lm_head",)
"""Modules kept in high precision, by name: torchtitan's ``filter_fqns = ["output"]`` (its llama3 configs), the
output head, under transformers' name."""


def _converted(module: torch.nn.Module, name: str) -> bool:
    if not isinstance(module, torch.nn.Linear):
        return False
    rows, columns = module.weight.shape
    aligned = rows % MATMUL_ALIGNMENT == 0 and columns % MATMUL_ALIGNMENT == 0
    return aligned and not any(head in name for head in HEAD_MODULES)


def convert_to_float8(model: torch.nn.Module, recipe: str) -> None:
    """``model``'s linears swapped in place for torchao's ``Float8Linear`` of ``recipe`` (tensorwise, rowwise)."""
    quiet_optional_libraries()
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    config = Float8LinearConfig.from_recipe_name(recipe)
    convert_to_float8_training(model, config=config, module_filter_fn=_converted)


def float8_linears(model: torch.nn.Module) -> list[str]:
    """The names of ``model``'s float8 linears."""
    from torchao.float8.float8_linear import Float8Linear

    return [name for name, module in model.named_modules() if isinstance(module, Float8Linear)]
