"""How long a job holds the GPUs: given, or derived from a training job's FLOPs.

A training job of N tokens runs ceil(N / tokens per step) steps; each step's FLOPs are counted from the traced ops
(``OpRecord.flops``: ``torch.utils.flop_counter``'s formulas for matmuls, attention and convolutions; elementwise
ops count 0) over forward, backward and what checkpointing recomputes. The job's FLOPs, spread over the GPUs, run
at the GPU's dense peak for the compute dtype (``estimators/throughput.py``, or the sheet's ``peak_tflops``) times
a utilisation, ``MODEL_FLOPS_UTILISATION`` unless given.

vramsim traces with checkpointing *marked*, not applied, and computes each checkpointing choice as a what-if
(``estimators/checkpointing.py``), so the trace holds no recompute: a choice's ``CheckpointCost.recomputed_flops``,
the steady-state step's, is added.
"""

from __future__ import annotations

from collections import Counter
from math import ceil

import networkx as nx

from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import MODEL_FLOPS_UTILISATION
from vramsim.estimators.checkpointing import CheckpointCost
from vramsim.estimators.throughput import PEAK_TFLOPS
from vramsim.results.quote import Duration, StepFlops, TrainingEstimate

from .sheet import Offer

__all__ = ["given_duration", "peak_tflops", "step_flops", "training_duration"]

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
"""The compute dtypes a peak is known for, as the options spell them, and torch's name for each."""


def given_duration(*, hours: float = 0, days: float = 0) -> Duration:
    """A duration the user states (``--hours``/``--days``)."""
    if hours < 0 or days < 0 or hours + days == 0:
        raise ConfigError(f"a duration is more than 0 hours or days; got hours={hours}, days={days}")
    return Duration(seconds=(hours + 24 * days) * 3600)


def step_flops(graph: nx.MultiDiGraph, tokens: int, *, recompute: CheckpointCost | None = None) -> StepFlops:
    """The FLOPs of the last traced training step of ``graph`` (``tracer/graph.py``), which trains on ``tokens``;
    ``recompute`` is the what-if cost of the checkpointing the job runs (see the module docstring)."""
    by_step: Counter[tuple[int, str]] = Counter()
    for node, data in graph.nodes(data=True):
        if node[0] == "op":
            by_step[data["step"], data["phase"]] += data["flops"]
    steps = sorted({step for step, phase in by_step if phase == "backward"})
    if not steps:
        raise ConfigError("the traced program has no backward pass: a job's duration is derived from a training step")
    last = steps[-1]
    traced = by_step[last, "recompute"]
    shared = recompute.recomputed_flops if recompute is not None else 0
    return StepFlops(
        forward=by_step[last, "forward"], backward=by_step[last, "backward"], recompute=traced + shared, tokens=tokens
    )


def peak_tflops(offer: Offer, dtype: str) -> tuple[float, str]:
    """One GPU's dense peak for ``dtype`` and where it comes from: the sheet's figure, else the datasheet's."""
    name = _DTYPES.get(dtype.lower().removeprefix("torch."))
    if name is None:
        raise ConfigError(f"unknown compute dtype {dtype!r}; choose one of: {', '.join(_DTYPES)}")
    if name in offer.peak_tflops:
        return offer.peak_tflops[name], f"price sheet {offer.sheet}, offer {offer.name!r}"
    known = PEAK_TFLOPS.get(offer.device.name)
    peak = getattr(known, name) if known is not None else None
    if known is None or peak is None:
        raise ConfigError(
            f"offer {offer.name!r}: vramsim has no dense {name} peak for {offer.device.name}; "
            f"give it in the sheet: peak_tflops = {{ {name} = ... }}"
        )
    return peak, known.source


def training_duration(step: StepFlops, tokens: int, offer: Offer, *, gpus: int, dtype: str, mfu: float | None = None) -> Duration:
    """How long ``tokens`` of training take on ``gpus`` of ``offer``: the steps' FLOPs over the GPUs' peak for
    ``dtype`` times ``mfu`` (``MODEL_FLOPS_UTILISATION`` when ``None``). ``step`` is the whole model's step: data
    parallel ranks each run one (the job's steps are spread over them); a tensor- or pipeline-parallel rank's trace
    holds a share of it, which the caller adds up over the ranks that share a step."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ConfigError(f"tokens is a whole number of tokens to train on, 1 or more; got {tokens!r}")
    if step.tokens < 1 or step.total < 1:
        raise ConfigError("the traced step trains on no tokens or counts no FLOPs: no duration follows from it")
    if mfu is not None and not 0 < mfu <= 1:
        raise ConfigError(f"mfu is the share of the peak a step runs at, more than 0 and at most 1; got {mfu}")
    if not 1 <= gpus <= offer.gpus_available:
        raise ConfigError(f"offer {offer.name!r} has {offer.gpus_available} GPUs; got gpus={gpus}")
    peak, source = peak_tflops(offer, dtype)
    utilisation = MODEL_FLOPS_UTILISATION if mfu is None else mfu
    estimate = TrainingEstimate(
        step=step,
        tokens=tokens,
        steps=ceil(tokens / step.tokens),
        gpus=gpus,
        dtype=_DTYPES[dtype.lower().removeprefix("torch.")],
        peak_tflops=peak,
        peak_source=source,
        mfu=utilisation,
        mfu_source="MODEL_FLOPS_UTILISATION" if mfu is None else "given",
    )
    return Duration(seconds=estimate.flops / (gpus * peak * 1e12 * utilisation), training=estimate)
