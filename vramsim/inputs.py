"""The batch a model is fed: synthesised from its config, or supplied by the user."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from .errors import UnsupportedError

__all__ = ["default_inputs"]


def default_inputs(model: torch.nn.Module, batch_size: int, seq_len: int, *, train: bool) -> dict[str, Any]:
    """Keyword arguments of ``model.forward`` for one batch, on the current default device.

    Token ids are random in ``[0, vocab_size)``; labels are the ids themselves (causal and
    masked LMs shift or mask internally), class indices for classifiers. The values never
    matter to memory, only shapes and dtypes do.
    """
    config = getattr(model, "config", None)
    main_input = getattr(model, "main_input_name", "input_ids")
    if config is None:
        raise UnsupportedError(
            f"{type(model).__name__} has no Hugging Face config, so its inputs cannot be synthesised; "
            "pass inputs=lambda batch_size, seq_len: {...}"
        )
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    if main_input == "input_ids":
        vocab = int(getattr(text_config, "vocab_size", 2) or 2)
        ids = torch.randint(0, vocab, (batch_size, seq_len))
        batch: dict[str, Any] = {"input_ids": ids}
        if train and _takes_labels(model):
            batch["labels"] = _labels(model, config, ids)
        return batch
    if main_input == "pixel_values":
        size = _as_pair(getattr(config, "image_size", 224))
        channels = int(getattr(config, "num_channels", 3))
        batch = {"pixel_values": torch.randn(batch_size, channels, *size)}
        if train and _takes_labels(model):
            batch["labels"] = torch.randint(0, max(int(getattr(config, "num_labels", 2)), 1), (batch_size,))
        return batch
    raise UnsupportedError(
        f"inputs for {type(model).__name__} (main input {main_input!r}) are not synthesised yet; "
        "pass inputs=lambda batch_size, seq_len: {...}"
    )


def _labels(model: torch.nn.Module, config: Any, ids: torch.Tensor) -> torch.Tensor:
    name = type(model).__name__
    if name.endswith("ForSequenceClassification"):
        return torch.randint(0, max(int(getattr(config, "num_labels", 2)), 1), (ids.shape[0],))
    return ids.clone()


def _takes_labels(model: torch.nn.Module) -> bool:
    return "labels" in inspect.signature(model.forward).parameters


def _as_pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[1])
    return int(value), int(value)
