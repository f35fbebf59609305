"""Closed vocabularies of the tracer: what a storage holds and when it was made."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Category", "Phase"]


class Category(StrEnum):
    """What a storage holds; the value is the key that ``--json`` prints.

    - PARAMETER: weights of the model (``nn.Parameter``), live for the whole run.
    - BUFFER: registered module buffers (rotary tables, running stats, masks).
    - GRADIENT: a storage that ends up as some parameter's ``.grad``.
    - OPTIMIZER_STATE: a storage held in ``optimizer.state`` after a step.
    - ACTIVATION: a forward-pass storage that autograd saved for backward.
    - KV_CACHE: a storage referenced by the model's generation cache.
    - INPUT: the batch fed to the model.
    - OUTPUT: what the model returns (logits, loss) while the caller holds it.
    - TEMPORARY: everything else: made and dropped inside a phase.
    - COMMUNICATION: buffers data parallelism adds (DDP gradient buckets, ZeRO reduce buckets,
      FSDP all-gather and reduce-scatter buffers); the tracer never marks it, the sharding
      what-if (``estimators/sharding/shard.py``) adds them.
    """

    PARAMETER = "parameters"
    BUFFER = "buffers"
    GRADIENT = "gradients"
    OPTIMIZER_STATE = "optimizer_states"
    ACTIVATION = "activations"
    KV_CACHE = "kv_cache"
    INPUT = "inputs"
    OUTPUT = "outputs"
    TEMPORARY = "temporaries"
    COMMUNICATION = "communication"


class Phase(StrEnum):
    """Where in the step an allocation happened.

    - SETUP: before the first step (model, inputs).
    - FORWARD: the model's forward pass (prefill and decode steps too).
    - RECOMPUTE: forward ops re-run inside backward by activation checkpointing.
    - BACKWARD: ``loss.backward()``.
    - OPTIMIZER: ``optimizer.step()`` and ``zero_grad``.
    """

    SETUP = "setup"
    FORWARD = "forward"
    RECOMPUTE = "recompute"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
