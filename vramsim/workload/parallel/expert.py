"""Expert parallelism for mixture-of-experts decoders as the program one rank runs.

torchtitan's ``ExpertParallel`` (``torchtitan/distributed/expert_parallel.py``) shards each MoE layer's
expert weights on dim 0 over the ``ep`` ranks (``distribute_tensor(param, mesh, [Shard(0)])``), so a
rank holds ``num_experts / ep`` experts with their gradients and optimizer states; everything else
(attention, norms, the router, shared experts, embeddings) is whole on every rank, which runs its own
tokens. Each MoE layer's routed tokens go to the ranks holding their experts and come back:
``_token_dispatch`` exchanges the ``tokens x top_k`` routed rows with ``all_to_all_single_autograd``
and permutes what it received into expert order (``_permute``); ``_token_combine`` unpermutes the
experts' output and exchanges it back. Megatron's ``MoEAlltoAllTokenDispatcher`` does the same.

Under balanced routing (``--moe-routing balanced``, the tracer's default) every rank sends
``tokens x top_k / ep`` rows to each rank and receives as many, so each of its local experts gets
``ep x tokens x top_k / num_experts`` rows: the rows one rank's model would give its experts if it
had ``num_experts / ep`` of them with the same ``top_k``. ``rank_config`` writes that config and the
tracer traces it (weights, gradients, optimizer states, the experts' activations); the all-to-all
buffers, which that program does not run, are placed on its timeline by
``estimators/expert_parallel.py``. What neither counts is in ``EP_NOT_TRACED``.
"""

from __future__ import annotations

import copy
from typing import Any

from vramsim.errors import ConfigError, UnsupportedError

__all__ = ["EP_EXPERT_COUNTS", "EP_NOT_TRACED", "rank_config", "routed_rows"]

EP_EXPERT_COUNTS = {"mixtral": "num_local_experts", "qwen2_moe": "num_experts", "qwen3_moe": "num_experts"}
"""MoE decoders split by expert, and their config's expert count: each routes with ``num_experts_per_tok``
over one router and runs its experts as transformers' 3-D ``gate_up_proj`` / ``down_proj`` tensors."""

EP_NOT_TRACED = (
    "the rank's router is traced with num_experts / ep rows (its logits too), where the real one is whole on every "
    "rank: (num_experts - num_experts / ep) x hidden_size router weights per MoE layer, with their gradients and "
    "optimizer states, are not counted; the all-to-all of the split sizes (one integer per expert) is not counted; "
    "a checkpointed MoE layer's recompute repeats its dispatch and combine, whose buffers are added for the forward "
    "and the backward only"
)


def rank_config(source: Any, ep: int) -> Any:
    """The transformers config of the decoder one of ``ep`` expert-parallel ranks runs: its experts only."""
    model_type = getattr(source, "model_type", None)
    key = EP_EXPERT_COUNTS.get(str(model_type))
    if key is None:
        raise UnsupportedError(
            f"ep splits the experts of {', '.join(sorted(EP_EXPERT_COUNTS))} decoders; "
            f"{model_type or type(source).__name__} is not one"
        )
    experts, top_k = getattr(source, key), source.num_experts_per_tok
    if experts % ep:
        raise ConfigError(f"ep={ep} must divide the experts ({experts}): each rank holds num_experts / ep of them")
    if top_k > experts // ep:
        raise UnsupportedError(
            f"ep={ep} leaves {experts // ep} experts per rank, fewer than top_k={top_k}: the rank's "
            "program cannot stand for balanced routing"
        )
    shard = copy.deepcopy(source)
    setattr(shard, key, experts // ep)
    return shard


def routed_rows(model: Any, config: Any) -> tuple[int, int]:
    """An experts call's routed rows (``batch x seq x top_k`` tokens' picks) and their width (``hidden_size``)."""
    source = model.config
    return config.batch_size * config.seq_len * source.num_experts_per_tok, source.hidden_size
