"""Text-only batches of a multimodal model whose own forward cannot run them, through its language model.

transformers 5.24's ``Llama4ForConditionalGeneration.forward`` ends by reading ``outputs.image_outputs``
from its language model's output, a ``MoeCausalLMOutputWithPast``, which has no such field: every call
with ``return_dict`` raises ``AttributeError``, with an image or without. Without ``pixel_values`` that
forward is its language model's (``Llama4ForCausalLM``) on the same token embeddings, with the same loss
(``ForCausalLMLoss`` over the text vocabulary), so the language model runs in its place and nothing
computed changes. The whole model stays built: the vision tower and its projector are weights held (and
counted, as the checkpoint loads them), not run, as for a text prompt. From transformers 5.25 the model's own
forward runs such a batch, and runs unrouted.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import transformers
from packaging.version import Version

__all__ = ["TEXT_ONLY_FORWARD", "TEXT_ONLY_MENDED", "route_text_only", "route_to_language_models", "text_only_note"]

TEXT_ONLY_FORWARD = {"Llama4ForConditionalGeneration": "language_model"}
"""Multimodal class -> its attribute holding the language model that runs a text-only batch in its place."""

TEXT_ONLY_MENDED = Version("5.25.0")
"""The first transformers release whose ``Llama4ForConditionalGeneration.forward`` no longer reads
``outputs.image_outputs`` from its language model's output."""

_ROUTED = "_vramsim_text_only_through"
"""Set on a module whose forward was routed, to the attribute it runs."""


def route_text_only(model: torch.nn.Module, batch: dict[str, Any]) -> None:
    """For a batch without ``pixel_values``, each ``TEXT_ONLY_FORWARD`` module (also inside a peft wrapper)
    forwards to its language model, whose signature it takes (what the steps read of ``forward``), in
    transformers releases before ``TEXT_ONLY_MENDED``."""
    if "pixel_values" not in batch and Version(transformers.__version__) < TEXT_ONLY_MENDED:
        route_to_language_models(model)


def route_to_language_models(model: torch.nn.Module) -> None:
    """Each ``TEXT_ONLY_FORWARD`` module's forward made its language model's."""
    for module in model.modules():
        attribute = TEXT_ONLY_FORWARD.get(type(module).__name__)
        if attribute is None:
            continue
        language_model = getattr(module, attribute)

        @functools.wraps(language_model.forward)
        def forward(*args: Any, _language_model: torch.nn.Module = language_model, **kwargs: Any) -> Any:
            return _language_model(*args, **kwargs)

        module.forward = forward
        setattr(module, _ROUTED, attribute)


def text_only_note(model: torch.nn.Module) -> str | None:
    """What the report says of a routed forward, or None where none was routed."""
    for module in model.modules():
        attribute = getattr(module, _ROUTED, None)
        if attribute is not None:
            inner = type(getattr(module, attribute)).__name__
            return (
                f"text-only batch: {type(module).__name__}.forward reads outputs.image_outputs, which its "
                f"language model's output lacks (transformers {transformers.__version__}), so its {attribute} "
                f"({inner}) runs the same computation in its place; the vision tower is loaded and counted in "
                "the weights but not run"
            )
    return None
