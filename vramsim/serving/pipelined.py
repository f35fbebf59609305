"""vLLM under pipeline parallel: each stage budgets its own layers, and the stage with the fewest blocks sets them all."""

from __future__ import annotations

import copy
import dataclasses

import torch
from transformers import PretrainedConfig

from vramsim.config.serving import ServeConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators import serving
from vramsim.estimators.kv_cache import LayerCache
from vramsim.results.serving import ServeReport, ServeStage
from vramsim.serving.assumptions import budget_assumptions, hybrid_note, pipeline_note
from vramsim.serving.cuda_graphs import cuda_graph_estimate
from vramsim.serving.kv_budget import budget_inputs, engine_budget, serve_report
from vramsim.serving.profile_run import profile_options
from vramsim.serving.traces import RankTraces
from vramsim.workload.targets import Target

__all__ = ["pipelined"]


@dataclasses.dataclass(frozen=True)
class _StageBudget:
    """One stage's budget and the terms behind it, kept for the stage whose blocks every stage gets."""

    stage: ServeStage
    inputs: serving.BudgetInputs
    budget: serving.Budget
    non_torch: list[tuple[str, int, str]]
    notes: list[str]
    hybrid: serving.HybridGroups | None
    layers: list[LayerCache]
    graphs: serving.CudaGraphEstimate | None


def pipelined(
    name: str,
    source: PretrainedConfig,
    rank: PretrainedConfig,
    config: ServeConfig,
    target: Target,
    dtype: torch.dtype,
    tokens: int,
    seqs: int,
    started: float,
    traces: RankTraces,
) -> ServeReport:
    """vLLM with pipeline parallel: each stage's rank holds its decoder layers (``serving.pp_partition``), the
    first also the embedding, the last the final norm and the head (and the embedding when they are tied);
    each profiles and budgets its own memory, and every stage gets the fewest blocks any stage can hold
    (``get_kv_cache_configs``, ``vllm/v1/core/kv_cache_utils.py``: "Change the num_blocks of each rank to the
    smallest among all ranks"), so the stage with the fewest sets the tokens and the concurrency."""
    bounds = _stage_bounds(name, source, rank, config)
    tied = bool(getattr(source, "tie_word_embeddings", False))
    stages = []
    for index, (first, last) in enumerate(bounds):
        head = index == len(bounds) - 1
        stage = _stage_config(rank, first, last)
        stages.append(
            _stage_budget(
                name,
                stage,
                config,
                target,
                dtype,
                tokens,
                seqs,
                traces,
                index,
                (first, last),
                embedding=index == 0 or (head and tied),
                head=head,
                vocab=int(getattr(source, "vocab_size", 0) or 0),
            )
        )
    picked = min(stages, key=lambda stage: stage.budget.kv_blocks)
    inputs = picked.inputs
    assumptions = [
        *budget_assumptions(config, picked.non_torch, picked.graphs, inputs.context_bytes, picked.notes, target),
        *hybrid_note(picked.hybrid, picked.layers),
        pipeline_note(config.pp, bounds),
    ]
    report = serve_report(name, config, target, inputs, picked.budget, tokens, seqs, started, assumptions=assumptions)
    return dataclasses.replace(report, stages=[stage.stage for stage in stages])


def _stage_bounds(name: str, source: PretrainedConfig, rank: PretrainedConfig, config: ServeConfig) -> list[tuple[int, int]]:
    """Each stage's decoder layers ``[first, last)``, once the model and engine are ones pipeline budgets model."""
    if config.engine != "vllm":
        raise UnsupportedError(f"{name}: pipeline-parallel budgets are modelled for vLLM only (use --engine vllm)")
    if getattr(source, "is_encoder_decoder", False):
        raise UnsupportedError(f"{name} is an encoder-decoder: vLLM serves it without pipeline parallel (use --pp 1)")
    count = getattr(rank, "num_hidden_layers", None)
    if not isinstance(count, int):
        raise UnsupportedError(f"{name}'s config names no num_hidden_layers: its pipeline stages cannot be built")
    try:
        return serving.pp_partition(count, config.pp)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None


def _stage_budget(
    name: str,
    stage: PretrainedConfig,
    config: ServeConfig,
    target: Target,
    dtype: torch.dtype,
    tokens: int,
    seqs: int,
    traces: RankTraces,
    index: int,
    layers_held: tuple[int, int],
    *,
    embedding: bool,
    head: bool,
    vocab: int,
) -> _StageBudget:
    """One stage's cache, profile run and budget: what it holds of the embedding and head, and its layers."""
    assert config.max_model_len is not None

    def checked(layers: list[LayerCache]) -> list[LayerCache]:
        if any(layer.kind == "state" for layer in layers):
            raise UnsupportedError(
                f"{name} holds recurrent state: pipeline-parallel budgets of Mamba hybrids are not modelled (use --pp 1)"
            )
        return layers

    traced = traces.rank(
        stage,
        target,
        dtype,
        long_tokens=config.max_model_len,
        tokens=tokens,
        seqs=seqs,
        quantization=config.quantization,
        checked=checked,
        embedding=embedding,
        head=head,
        **profile_options(config, target, dtype, vocab, head=head),
    )
    weights, activation, notes, layers = traced.weights_bytes, traced.activation_peak_bytes, traced.notes, traced.layers
    graphs = cuda_graph_estimate(config, traces, stage, target, dtype, tokens, seqs, embedding=embedding, head=head)
    inputs, non_torch = budget_inputs(config, target, weights, activation, layers, tokens, graphs)
    budget, hybrid = engine_budget(name, config.engine, inputs)
    record = ServeStage(
        rank=index,
        layers=layers_held,
        weights_bytes=weights,
        activation_peak_bytes=activation,
        kv_cache_bytes=budget.kv_cache_bytes,
        kv_blocks=budget.kv_blocks,
    )
    return _StageBudget(record, inputs, budget, non_torch, notes, hybrid, layers, graphs)


def _stage_config(rank: PretrainedConfig, first: int, last: int) -> PretrainedConfig:
    """A pipeline stage's model: the decoder layers ``[first, last)`` (per-layer lists cut to them)."""
    stage = copy.deepcopy(rank)
    stage.num_hidden_layers = last - first
    types = getattr(stage, "layer_types", None)
    if isinstance(types, list):
        stage.layer_types = types[first:last]
    return stage
