"""What a parallel layout costs beyond memory: bytes each rank sends per micro-batch, and the pipeline's bubble.

The strategy search (``vramsim/search/strategy.py``) orders settings of equal GPU counts by these. Each axis's
volume is its paper's formula with the named constants of ``estimators/assumptions.py``; volumes, not
times: link bandwidths (NVLink within a node, the network across), overlap with compute and latency are
not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from .assumptions import (
    DATA_PARALLEL_COMMUNICATION,
    EXPERT_PARALLEL_ALL_TO_ALLS_PER_LAYER,
    PIPELINE_SENDS_PER_CHUNK,
    TENSOR_PARALLEL_ALL_REDUCES_PER_LAYER,
)

__all__ = ["LayerShape", "communication_bytes", "pipeline_bubble"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerShape:
    """What one micro-batch of the model sends, read from its config."""

    layers: int
    """Decoder layers of the whole model."""
    tokens: int
    """Tokens of one micro-batch (batch x sequence), before context parallelism splits them."""
    hidden: int
    kv_width: int
    """Key (and value) width of one layer: kv heads x head dim, before tensor parallelism splits them."""
    top_k: int = 0
    """Experts each token is routed to; 0 for a dense model."""
    activation_bytes: int
    """Bytes of an activation element: the autocast dtype's, else the weights'."""
    weight_bytes: int
    """Bytes of the whole model's weights, as held."""
    expert_weight_bytes: int = 0
    """Of ``weight_bytes``, the routed experts' (``expert_weight``): under expert parallelism a rank holds 1/ep of them,
    synchronised over the dp / ep ranks holding the same experts."""
    trained_bytes: int | None = None
    """Of ``weight_bytes``, the weights that are trained (``requires_grad``); None: all of them."""
    trained_expert_bytes: int = 0
    """Of ``trained_bytes``, the routed experts'."""


def _synced(weight_bytes: int, expert_bytes: int, dp: int, ep: int) -> float:
    """What one rank sends in a ring collective over ``weight_bytes`` of weights, ``expert_bytes`` of them the
    routed experts' (under expert parallelism over the dp / ep ranks holding the same experts)."""
    dense = weight_bytes - expert_bytes
    return dense * _ring(dp) + (expert_bytes / ep * _ring(dp // ep) if ep > 1 else expert_bytes * _ring(dp))


def _ring(ranks: int) -> float:
    """The share of a message each rank sends in a ring collective over ``ranks``."""
    return (ranks - 1) / ranks


def communication_bytes(
    shape: LayerShape,
    *,
    scheme: str | None,
    dp: int,
    tp: int,
    pp: int,
    virtual: int,
    micro_batches: int,
    cp: int,
    ep: int,
    recomputed_layers: float,
) -> float:
    """Bytes one rank sends per micro-batch of ``shape.tokens`` tokens, every axis added: ``scheme`` over
    ``dp`` ranks (a name of ``DATA_PARALLEL_COMMUNICATION``, once per step of ``micro_batches`` with a
    pipeline; the experts' weights over dp / ep), tensor, pipeline, context and expert parallel;
    ``recomputed_layers`` of the model run their forward again (checkpointed in full)."""
    layers, recomputed = shape.layers / pp, recomputed_layers / pp  # a rank's share of the layers
    tokens = shape.tokens / cp
    activation = tokens * shape.hidden * shape.activation_bytes
    total = 0.0
    if scheme is not None and dp > 1:
        gathers, passes = DATA_PARALLEL_COMMUNICATION[scheme]
        held = _synced(shape.weight_bytes, shape.expert_weight_bytes, dp, ep)
        trained = held if shape.trained_bytes is None else _synced(shape.trained_bytes, shape.trained_expert_bytes, dp, ep)
        total += (gathers * held + passes * trained) / (tp * pp * micro_batches)
    if tp > 1:
        forward, backward = TENSOR_PARALLEL_ALL_REDUCES_PER_LAYER
        total += ((forward + backward) * layers + forward * recomputed) * 2 * _ring(tp) * activation
    if pp > 1:
        total += PIPELINE_SENDS_PER_CHUNK * virtual * activation
    if cp > 1:  # torch 2.13 _templated_ring_attention: forward sends the rank's K/V chunk cp - 1 times, backward
        # again cp - 1 times plus the K/V gradients cp times in float32 (convert_to_f32); a layer checkpointed in
        # full sends its forward ring again
        kv = 2 * tokens * shape.kv_width / tp  # K and V of the rank's chunk, elements
        total += (layers * (2 * (cp - 1) * shape.activation_bytes + cp * 4) + recomputed * (cp - 1) * shape.activation_bytes) * kv
    if ep > 1:
        forward, backward = EXPERT_PARALLEL_ALL_TO_ALLS_PER_LAYER
        routed = tokens * shape.top_k * shape.hidden * shape.activation_bytes
        total += ((forward + backward) * layers + forward * recomputed) * _ring(ep) * routed
    return total


def pipeline_bubble(stages: int, micro_batches: int, virtual: int) -> float:
    """``PIPELINE_BUBBLE``: idle time as a share of the ideal step (0 without a pipeline)."""
    return (stages - 1) / (micro_batches * virtual)
