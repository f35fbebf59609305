"""A batch packed padding-free, as TRL's ``packing=True`` with ``padding_free`` and transformers'
``DataCollatorWithFlattening`` give it to the model.

``DataCollatorWithFlattening`` concatenates the batch's sequences into one row (``input_ids`` and ``labels`` of
shape ``(1, batch x seq)``, the first label of each sequence ``-100``) and returns ``position_ids`` that restart
at 0 for each sequence, with no ``attention_mask``. The model then runs one row of ``batch x seq`` tokens: no
padding, and attention kept within each sequence by the kernel transformers picks from the restarting positions
(flash-attention's varlen call with ``cu_seqlens``; SDPA and eager a block-diagonal mask from
``find_packed_sequence_indices``). The positions are seeded with their values, so the traced model reads them
as the real one does. Every sequence is ``seq_len`` long here: a packed run's memory depends on its token count.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from vramsim.errors import UnsupportedError
from vramsim.tracer.data_dependent import seed
from vramsim.workload.inputs import default_inputs

__all__ = ["packed_inputs"]


def packed_inputs(model: torch.nn.Module, batch_size: int, seq_len: int, *, train: bool) -> dict[str, Any]:
    """``batch_size`` sequences of ``seq_len`` tokens flattened into one row, on the current default device."""
    get_base_model = getattr(model, "get_base_model", None)
    base = get_base_model() if callable(get_base_model) else model
    if "position_ids" not in inspect.signature(base.forward).parameters:
        raise UnsupportedError(
            f"{type(base).__name__} takes no position_ids, so a packed row cannot restart its positions per sequence"
        )
    batch = default_inputs(model, 1, batch_size * seq_len, train=train)
    tensors = {name for name, value in batch.items() if isinstance(value, torch.Tensor)}
    if tensors - {"input_ids", "labels"}:
        extra = ", ".join(sorted(tensors - {"input_ids", "labels"}))
        raise UnsupportedError(f"packed is modelled for token ids and labels only; {type(base).__name__} also takes {extra}")
    device = batch["input_ids"].device
    positions = torch.arange(seq_len, device="cpu").repeat(batch_size).unsqueeze(0)
    batch["position_ids"] = seed(positions, device)
    return batch
