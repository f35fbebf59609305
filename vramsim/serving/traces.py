"""The traced runs behind a rank's budget (its cache probes and profile run), kept so that budgets of the same
program share them: the KV cache dtype, the memory utilization and the CUDA graphs change only the arithmetic
over them (``kv_budget.py``), never what is traced."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.estimators.kv_cache import LayerCache
from vramsim.serving.probes import read_kv_cache
from vramsim.serving.profile_run import profile_run
from vramsim.workload.targets import Target

__all__ = ["RankTrace", "RankTraces"]


@dataclass(frozen=True, slots=True)
class RankTrace:
    """What one rank's traces measured: its cache layers (as checked and split for the rank) and its profile run."""

    layers: list[LayerCache]
    weights_bytes: int
    activation_peak_bytes: int
    notes: list[str]
    """What the profile run's trace assumed (``profile_run``'s notes)."""
    encoder_peak_bytes: int = 0
    """A multimodal model's encoder profile alone: its peak over the weights (0 without one)."""
    encoder_cache_bytes: int = 0
    """The encoder's outputs the profile run keeps through the decoder's run (vLLM's encoder cache)."""
    lora_bytes: int = 0
    """vLLM's LoRA slots and punica buffers, allocated with the weights (0 without ``--enable-lora``)."""


class RankTraces:
    """Each rank traced once: a budget asks for a rank's traces by everything that shapes them (the rank's config,
    device, dtype, the request length the probes reach, the profile run's tokens, sequences and quantization)."""

    def __init__(self) -> None:
        self._layers: dict[tuple[Any, ...], list[LayerCache]] = {}
        self._profiles: dict[tuple[Any, ...], tuple[int, int, list[str], int, int]] = {}
        self._encoders: dict[tuple[Any, ...], int] = {}
        self._captures: dict[tuple[Any, ...], int] = {}
        self._drafts: dict[tuple[Any, ...], tuple[list[LayerCache], int, int]] = {}

    @property
    def traced(self) -> int:
        """Ranks traced so far: one per distinct program the budgets asked for."""
        return len(self._profiles)

    def rank(
        self,
        rank: PretrainedConfig,
        target: Target,
        dtype: torch.dtype,
        *,
        long_tokens: int,
        tokens: int,
        seqs: int,
        quantization: str | None,
        checked: Callable[[list[LayerCache]], list[LayerCache]],
        **held: Any,
    ) -> RankTrace:
        """The rank's cache probes up to ``long_tokens`` as ``checked`` passes them (it refuses what the budget
        does not model, each time, before any profile run), then its profile run (``profile_run``'s keywords in
        ``held``); each traced only the first time it is asked for."""
        key = (
            json.dumps(rank.to_dict(), sort_keys=True, default=str),
            target.name,
            str(dtype),
            long_tokens,
            tokens,
            seqs,
            quantization,
            tuple(sorted(held.items())),
        )
        if key not in self._layers:
            self._layers[key] = read_kv_cache(rank, device=target.name, dtype=dtype, long_tokens=long_tokens)
        layers = checked(self._layers[key])
        if key not in self._profiles:
            self._profiles[key] = profile_run(rank, target, dtype, tokens, seqs, quantization, **held)
        weights, activation, notes, cache, adapters = self._profiles[key]
        if held.get("encoder") is not None and key not in self._encoders:
            self._encoders[key] = profile_run(rank, target, dtype, tokens, seqs, quantization, **held, decoder=False)[1]
        return RankTrace(layers, weights, activation, list(notes), self._encoders.get(key, 0), cache, adapters)

    def capture(
        self, rank: PretrainedConfig, target: Target, dtype: torch.dtype, *, tokens: int, quantization: str | None, **held: Any
    ) -> int:
        """The activation peak of one forward over ``tokens`` tokens as a CUDA graph captures it: the model's forward
        alone (vLLM computes the logits and samples outside the graph), traced the first time it is asked for."""
        key = (
            json.dumps(rank.to_dict(), sort_keys=True, default=str),
            target.name,
            str(dtype),
            tokens,
            quantization,
            tuple(sorted(held.items())),
        )
        if key not in self._captures:
            _, activation, _, _, _ = profile_run(rank, target, dtype, tokens, 1, quantization, sampler=None, vocab=0, **held)
            self._captures[key] = activation
        return self._captures[key]

    def draft(
        self, rank: PretrainedConfig, target: Target, dtype: torch.dtype, *, long_tokens: int, tokens: int
    ) -> tuple[list[LayerCache], int, int]:
        """A speculative draft model's rank: its cache layers up to ``long_tokens``, its weights and the activation
        peak of its dummy run over ``tokens`` tokens (the forward alone: the proposer computes no logits there),
        traced the first time they are asked for."""
        key = (json.dumps(rank.to_dict(), sort_keys=True, default=str), target.name, str(dtype), long_tokens, tokens)
        if key not in self._drafts:
            layers = read_kv_cache(rank, device=target.name, dtype=dtype, long_tokens=long_tokens)
            weights, activation, _, _, _ = profile_run(rank, target, dtype, tokens, 1, None, sampler=None, vocab=0)
            self._drafts[key] = (layers, weights, activation)
        return self._drafts[key]
