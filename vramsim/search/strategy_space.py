"""The settings the strategy search weighs on N GPUs, and what each costs beyond memory.

A setting is a parallel layout (tensor x pipeline x context x expert parallel, the rest data parallel), a
data-parallel scheme and a checkpointing choice. The layouts are the ones Megatron's authors recommend
(Narayanan et al. 2021, section 3.3): tensor parallelism within a node (``GPUS_PER_NODE``), pipeline
stages across nodes, data parallelism over what is left; expert parallelism only for a mixture of
experts, its ranks taken from the data-parallel ones (torchtitan's EP within dp_shard, DeepSpeed-MoE's
expert-data-parallel groups); context parallelism at every degree whose 2 x cp chunks divide the sequence
(not with expert parallelism or custom inputs, which vramsim does not model together with it).
GPipe is not weighed: 1F1B has its bubble and communication and never holds more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from vramsim.config import SimulationConfig
from vramsim.estimators.assumptions import GPUS_PER_NODE
from vramsim.estimators.communication import LayerShape
from vramsim.estimators.expert_parallel import expert_weight
from vramsim.results.strategy import SCHEMES, Setting
from vramsim.workload.parallel.expert import EP_EXPERT_COUNTS
from vramsim.workload.parallel.tensor import TP_MODEL_TYPES

__all__ = ["CHECKPOINTING_BY_RECOMPUTE", "CHOICES", "PIPELINE_SCHEMES", "layer_shape", "settings"]

PIPELINE_SCHEMES = ("DDP", "ZeRO-1", "FSDP2 grad-op", "FSDP2 full")
"""The schemes a pipeline runs under: DeepSpeed's PipelineEngine refuses ZeRO-2 and -3."""

CHECKPOINTING_BY_RECOMPUTE = ("none", "selective", "every:2", "full")
"""Uniform checkpointing choices from the least recomputed forward to the most: nothing, attention's core,
every other decoder layer, every layer."""

CHOICES = (*CHECKPOINTING_BY_RECOMPUTE, "auto")
"""Every checkpointing choice tried: the uniform ones, then ``auto`` (per layer, the least recompute that fits)."""

_SCHEDULES = ("1f1b", "interleaved-1f1b")


def layer_shape(program_model: Any, config: SimulationConfig) -> tuple[LayerShape, Any]:
    """The model's shape as the communication formulas read it, and its transformers config (None without one)."""
    named = {id(p): (name, p) for name, p in program_model.named_parameters()}.values()
    weights = [p for _, p in named]
    weight_bytes = sum(p.numel() * p.element_size() for p in weights)
    expert_bytes = sum(p.numel() * p.element_size() for name, p in named if expert_weight(name))
    trained = [(name, p) for name, p in named if p.requires_grad]
    trained_bytes = sum(p.numel() * p.element_size() for _, p in trained)
    trained_expert_bytes = sum(p.numel() * p.element_size() for name, p in trained if expert_weight(name))
    autocast = config.mixed_precision
    element = autocast.itemsize if isinstance(autocast, torch.dtype) else next(iter(weights)).element_size()
    source: Any = getattr(program_model, "config", None)
    hidden, layers = getattr(source, "hidden_size", None), getattr(source, "num_hidden_layers", None)
    if not isinstance(hidden, int) or not isinstance(layers, int):
        return LayerShape(
            layers=0,
            tokens=0,
            hidden=0,
            kv_width=0,
            activation_bytes=element,
            weight_bytes=weight_bytes,
            trained_bytes=trained_bytes,
            trained_expert_bytes=trained_expert_bytes,
        ), None
    heads = source.num_attention_heads
    head_dim = getattr(source, "head_dim", None) or hidden // heads
    kv_width = (getattr(source, "num_key_value_heads", None) or heads) * head_dim
    return LayerShape(
        layers=layers,
        tokens=config.batch_size * config.seq_len,
        hidden=hidden,
        kv_width=kv_width,
        top_k=getattr(source, "num_experts_per_tok", 0) or 0,
        activation_bytes=element,
        weight_bytes=weight_bytes,
        expert_weight_bytes=expert_bytes,
        trained_bytes=trained_bytes,
        trained_expert_bytes=trained_expert_bytes,
    ), source


def settings(gpus: int, source: Any, config: SimulationConfig, gpus_per_node: int | None = None) -> Iterator[Setting]:
    """Every setting on exactly ``gpus`` GPUs for a model of transformers config ``source`` (None: data parallel only),
    in nodes of ``gpus_per_node`` (``GPUS_PER_NODE`` when None; a price sheet's offer gives its own)."""
    for tp, pp, cp, ep in _layouts(gpus, source, config, GPUS_PER_NODE if gpus_per_node is None else gpus_per_node):
        dp = gpus // (tp * pp)
        schemes = ["one GPU" if gpus == 1 else "one replica"] if dp == 1 else PIPELINE_SCHEMES if pp > 1 else list(SCHEMES)
        for schedule in _SCHEDULES if pp > 1 else (None,):
            for scheme in schemes:
                for choice in CHOICES:
                    yield Setting(
                        gpus=gpus, tp=tp, pp=pp, cp=cp, ep=ep, pp_schedule=schedule, scheme=scheme, checkpointing=choice
                    )


def _layouts(gpus: int, source: Any, config: SimulationConfig, node: int) -> Iterator[tuple[int, int, int, int]]:
    """(tp, pp, cp, ep) dividing ``gpus``: tp within a node of ``node`` GPUs, pp at most one stage per node, ep (for
    experts) and cp (where its 2 x cp chunks divide the sequence, not with ep) among the data-parallel ranks."""
    model_type = str(getattr(source, "model_type", ""))
    experts = getattr(source, EP_EXPERT_COUNTS.get(model_type, ""), None) if source is not None else None
    layers = getattr(source, "num_hidden_layers", 1) if source is not None else 1
    tps = _powers(min(gpus, node)) if model_type in TP_MODEL_TYPES else [1]
    pps = [p for p in _powers(max(1, gpus // node)) if p <= layers] if source is not None else [1]
    eps = [1]
    if isinstance(experts, int):
        top_k = getattr(source, "num_experts_per_tok", 1)
        eps += [e for e in _powers(gpus) if e > 1 and experts % e == 0 and experts // e >= top_k]
    splits = source is not None and config.inputs is None
    cps = [c for c in _powers(gpus) if c == 1 or (splits and config.seq_len % (2 * c) == 0)]
    for tp in tps:
        for pp in pps:
            for cp in cps:
                for ep in eps:
                    if gpus % (tp * pp * cp * ep) == 0 and (ep == 1 or cp == 1):
                        yield tp, pp, cp, ep


def _powers(limit: int) -> list[int]:
    """1, 2, 4 ... up to ``limit``."""
    return [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]
