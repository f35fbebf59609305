"""Tensor parallelism (Megatron's split, as DTensor's ``parallelize_module`` applies it) as the
program one rank runs.

Megatron splits attention and the MLP across ``tp`` ranks: q/k/v and gate/up are column-parallel
(each rank computes its heads and its slice of the intermediate size), o and down are
row-parallel (each rank multiplies its slice and the partial sums are all-reduced); the embedding
and the LM head are split over the vocabulary and the loss is computed on each rank's slice of
the logits (vocab-parallel cross-entropy, DTensor's ``loss_parallel``). Norms and everything
``hidden_size`` wide stay whole on every rank.

So one rank runs the same decoder with ``heads / tp``, ``kv_heads / tp``, ``intermediate / tp``
and ``vocab / tp`` at the original ``head_dim`` and ``hidden_size``: ``rank_config`` writes that
config and the tracer traces it, so every per-rank figure (weights, gradients, optimizer states,
activations) comes from a traced program. What the shard config does not run (the collectives'
own buffers, DTensor's embedding mask) is listed in ``TP_NOT_TRACED`` and in the report.

A mixture-of-experts decoder (``TP_MOE_MODEL_TYPES``) is split as its transformers ``base_model_tp_plan`` splits
it: each expert's ``gate_up_proj`` column-wise and ``down_proj`` row-wise (``moe_tp_experts``), so a rank holds
every expert at ``intermediate / tp``; the router and Qwen-MoE's shared expert, which the plan leaves out, whole.
Checked against DTensor tensor parallel run for real on one rank of a fake process group
(``tests/ground_truth/test_tensor_parallel_ground_truth.py``).
"""

from __future__ import annotations

import copy
from math import ceil
from typing import Any

from vramsim.errors import ConfigError, UnsupportedError

__all__ = ["TP_MODEL_TYPES", "TP_MOE_MODEL_TYPES", "TP_NOT_TRACED", "rank_config"]

TP_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
"""Decoders whose attention is q/k/v/o with ``head_dim`` read from the config and whose MLP is
gate/up/down, the layout Megatron and torchtitan's llama plan split; others are refused."""

TP_MOE_MODEL_TYPES = {"mixtral": "intermediate_size", "qwen2_moe": "moe_intermediate_size", "qwen3_moe": "moe_intermediate_size"}
"""MoE decoders with the same attention, and the config field of each expert's intermediate size, which their
transformers ``base_model_tp_plan`` splits (``packed_colwise`` gate_up_proj, ``rowwise`` down_proj)."""

TP_NOT_TRACED = (
    "the row-parallel all-reduces (o_proj, down_proj, the embedding) and the backward all-reduce of the "
    "column-parallel input gradients are not traced: Megatron reduces in place (no buffer), DTensor's functional "
    "all-reduce makes an out-of-place output that replaces the partial sum (one hidden-sized tensor for a moment); "
    "the vocab-parallel embedding's mask and the loss's max and sum-of-exp all-reduces are one value per token"
)


def rank_config(source: Any, tp: int) -> Any:
    """The transformers config of the decoder one of ``tp`` ranks runs (vocabulary chunked as
    ``torch.chunk`` chunks it, so rank 0 holds the largest slice)."""
    model_type = getattr(source, "model_type", None)
    if model_type not in TP_MODEL_TYPES and model_type not in TP_MOE_MODEL_TYPES:
        raise UnsupportedError(
            f"tp splits {', '.join(sorted(TP_MODEL_TYPES | set(TP_MOE_MODEL_TYPES)))} decoders (Megatron's layout, "
            f"transformers' tp_plan for the MoE ones); {model_type or type(source).__name__} is not one"
        )
    heads = source.num_attention_heads
    kv_heads = getattr(source, "num_key_value_heads", None) or heads
    split = ["intermediate_size", *([TP_MOE_MODEL_TYPES[model_type]] if model_type in TP_MOE_MODEL_TYPES else [])]
    for name, value in (
        ("num_attention_heads", heads),
        ("num_key_value_heads", kv_heads),
        *((name, getattr(source, name)) for name in dict.fromkeys(split)),
    ):
        if value % tp:
            raise ConfigError(f"tp={tp} must divide {name} ({value}): Megatron splits it evenly across the ranks")
    shard = copy.deepcopy(source)
    shard.head_dim = getattr(source, "head_dim", None) or source.hidden_size // heads
    shard.num_attention_heads = heads // tp
    shard.num_key_value_heads = kv_heads // tp
    for name in dict.fromkeys(split):
        setattr(shard, name, getattr(source, name) // tp)
    shard.vocab_size = ceil(source.vocab_size / tp)
    if (getattr(source, "pad_token_id", None) or 0) >= shard.vocab_size:
        shard.pad_token_id = None  # the padding row lives on another rank's slice
    return shard
