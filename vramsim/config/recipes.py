"""Recipes by name: what a training run does by default where the libraries people train with differ.

Each recipe is read from its library's own code (the versions named per row); an option given explicitly
overrides the recipe's default for it. Where the libraries agree there is nothing to choose: every one of them
ends a step with ``zero_grad(set_to_none=True)`` (torch's default, which transformers' Trainer and accelerate's
``AcceleratedOptimizer.zero_grad`` pass on; torchtune's recipes and torchtitan's ``optimizers.zero_grad()`` say
so), so gradients are freed between steps under every recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramsim.config.options import as_is, option
from vramsim.errors import ConfigError, UnsupportedError

__all__ = ["KBIT_PREPARATIONS", "RECIPES", "RECIPE_DEFAULT", "Recipe", "RecipeOptions"]

RECIPE_DEFAULT = "recipe"
"""The default of an option a recipe decides whose ``None`` means something of its own (``optimizer``: none,
``loss``: the model's own, ``mixed_precision``: no autocast): the recipe's value, filled in by ``check_recipe``."""

KBIT_PREPARATIONS = ("peft", "none")
"""A QLoRA base's preparation: ``peft`` (``peft.prepare_model_for_kbit_training``: the base frozen, its unquantized
weights, embeddings, norms and head, upcast to float32) or ``none`` (trained as loaded)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    """One library's defaults for the options it decides."""

    source: str
    """The library and version the defaults are read from."""
    dtype: str | None
    """The weights' dtype; ``None``: what transformers' ``from_pretrained`` loads with none passed."""
    mixed_precision: str | None
    """Autocast around the forward; ``None``: none."""
    loss: str | None
    """A named loss (``vramsim/workload/losses.py``); ``None``: the model's own."""
    optimizer: str
    kbit_preparation: str
    """What a QLoRA base goes through before the adapters (``KBIT_PREPARATIONS``)."""
    adapters_in_base_dtype: bool
    """LoRA adapters in the base's dtype (``get_peft_model(autocast_adapter_dtype=False)``, or adapters built in it);
    otherwise peft's default upcasts bf16/fp16 adapters to float32."""
    lora: bool = True
    """Whether the library trains LoRA adapters at all."""
    notes: tuple[str, ...] = ()
    """What the recipe leaves out, for the report."""


RECIPES: dict[str, Recipe] = {
    "trainer": Recipe(
        source="transformers' Trainer with peft, as its QLoRA scripts write it",
        dtype=None,
        mixed_precision=None,
        loss=None,
        optimizer="adamw",  # TrainingArguments.optim: adamw_torch_fused on torch >= 2.8
        kbit_preparation="peft",  # the QLoRA notebooks and scripts call prepare_model_for_kbit_training
        adapters_in_base_dtype=False,
    ),
    "trl-sft": Recipe(
        source="TRL 1.9's SFTTrainer and SFTConfig",
        dtype="float32",  # create_model_from_path: dtype defaults to float32 when model_init_kwargs names none
        mixed_precision="bf16",  # SFTConfig: bf16 defaults to True unless fp16 is set
        loss=None,
        optimizer="adamw",  # SFTConfig keeps TrainingArguments.optim
        kbit_preparation="none",  # SFTTrainer stopped calling it in 0.27 (moved to trl.experimental)
        adapters_in_base_dtype=False,  # autocast_adapter_dtype=False only under ZeRO-3 with an unquantized base
        notes=(
            "SFTConfig defaults gradient_checkpointing=True: give --gradient-checkpointing to match it",
            "SFTConfig's default loss_type='chunked_nll' (TRL 1.9) is not traced: the loss here is loss_type='nll', "
            "the model's own; the token accuracy and entropy SFTTrainer logs from the logits are not traced",
        ),
    ),
    "torchtune": Recipe(
        source="torchtune 0.6.1's single-device recipes and their llama3_1 configs",
        dtype="bf16",  # dtype: bf16, the model built under set_default_dtype
        mixed_precision=None,
        loss="chunked-ce",  # loss: CEWithChunkedOutputLoss (8 chunks)
        optimizer="adamw",  # optimizer: torch.optim.AdamW, fused: True
        kbit_preparation="none",  # QLoRA: NF4 base weights, embeddings, norms and head stay bf16
        adapters_in_base_dtype=True,  # adapter params validated to be in dtype
        notes=("its configs set enable_activation_checkpointing: True: give --gradient-checkpointing to match",),
    ),
    "torchtitan": Recipe(
        source="torchtitan 0.2.2's train.py and job config",
        dtype="float32",  # training.dtype: float32
        mixed_precision="bf16",  # mixed_precision_param: bfloat16, by torch.autocast on one device or DDP
        loss=None,  # cross_entropy_loss: the whole logits upcast to float32, as the model's own loss does
        optimizer="adamw",  # optimizer.name AdamW, implementation: fused
        kbit_preparation="none",
        adapters_in_base_dtype=False,
        lora=False,
    ),
    "accelerate": Recipe(
        source="accelerate 1.16's Accelerator with its examples' loop (nlp_example.py)",
        dtype=None,
        mixed_precision=None,  # Accelerator(mixed_precision='no')
        loss=None,  # outputs.loss
        optimizer="adamw-foreach",  # torch.optim.AdamW(params, lr=lr): torch picks foreach on GPUs
        kbit_preparation="none",  # accelerate calls no k-bit preparation
        adapters_in_base_dtype=False,
    ),
}
"""Each recipe's defaults, by its name (``--recipe``)."""


@dataclass(kw_only=True)
class RecipeOptions:
    """Which library's defaults a training run takes, and QLoRA's base preparation."""

    recipe: str = field(
        default="trainer",
        metadata=option(
            help=f"{'|'.join(RECIPES)}: whose defaults a training run takes where the libraries differ (weight dtype, "
            "autocast, loss, optimizer, QLoRA's k-bit preparation, adapter dtype); options given override them "
            "(vramsim/config/recipes.py)",
            report=as_is,
        ),
    )
    kbit_preparation: str | None = field(
        default=None,
        metadata=option(
            help="a QLoRA base's preparation: peft (prepare_model_for_kbit_training: embeddings, norms and head upcast "
            "to float32) or none (trained as loaded, as torchtune and TRL >= 0.27 do); none given: the recipe's",
            report=as_is,
        ),
    )

    def check_recipe(self, config: Any) -> None:
        """The recipe named must be one (a training run's, unless the Trainer's); its defaults fill in the options
        left at theirs."""
        named = RECIPES.get(str(self.recipe).lower())
        if named is None:
            raise ConfigError(f"unknown recipe {self.recipe!r}; choose one of: {', '.join(RECIPES)}")
        self.recipe = str(self.recipe).lower()
        if self.kbit_preparation is not None and self.kbit_preparation not in KBIT_PREPARATIONS:
            raise ConfigError(
                f"unknown kbit_preparation {self.kbit_preparation!r}; choose one of: {', '.join(KBIT_PREPARATIONS)}"
            )
        if config.task != "train" and self.recipe != "trainer":
            raise ConfigError(f"recipe={self.recipe!r} sets a training run's defaults; task={config.task!r} takes none")
        if config.lora is not None and not named.lora:
            raise UnsupportedError(f"recipe={self.recipe!r}: {named.source} trains whole models, it has no LoRA")
        for name in ("optimizer", "loss", "mixed_precision"):
            if isinstance(getattr(config, name), str) and getattr(config, name) == RECIPE_DEFAULT:
                setattr(config, name, getattr(named, name))
        if config.dtype is None:
            config.dtype = named.dtype
        if self.kbit_preparation is None:
            self.kbit_preparation = named.kbit_preparation

    @property
    def recipe_defaults(self) -> Recipe:
        """The recipe's row of ``RECIPES``."""
        return RECIPES[self.recipe]
