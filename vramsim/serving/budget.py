"""Serving budgets: the KV cache a serving engine gets, from the model's real cache and a traced profile forward.

Three traced runs of one tensor-parallel rank's model on the meta device:

- the cache probes (``probes.py``): a prefill and one decode step with the cache the model builds
  itself, at three prompt lengths; each cache layer's tensors give its bytes per token
  (``estimators/kv_cache.py``).
- vLLM's profile run (``profile_run.py``): one forward over ``max_num_batched_tokens`` tokens
  keeping logits for ``max_num_seqs`` of them; its steady-state peak over the weights is the
  activation peak.
- the budget arithmetic (``kv_budget.py`` over ``estimators/serving.py``), with vLLM's KV cache groups
  where layers differ: full and sliding attention, attention and Mamba state (pages unified:
  ``serving.MambaAlignment``), Whisper's self- and cross-attention.

Pipeline parallel budgets each stage (``pipelined.py``); the assumptions listed are ``assumptions.py``'s.
This module checks the request and picks the path, and, with ``concurrency``, the fewest GPUs.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.cache import ResultCache, cached_answer, request_key
from vramsim.config import SimulationConfig
from vramsim.config.precision import DTYPES
from vramsim.config.serving import ServeConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators import serving
from vramsim.estimators.kv_cache import LayerCache
from vramsim.results.serving import ServeEncoder, ServeLora, ServeReport, ServeSpeculative
from vramsim.serving.assumptions import adapter_notes, budget_assumptions, encoder_note, hybrid_note, multimodal_note
from vramsim.serving.cuda_graphs import cuda_graph_estimate
from vramsim.serving.kv_budget import budget_inputs, engine_budget, serve_report
from vramsim.serving.lora import LoraSettings, lora_settings
from vramsim.serving.max_model_len import resolve_max_model_len
from vramsim.serving.multimodal import encoder_batch, multimodal_kind
from vramsim.serving.pipelined import pipelined
from vramsim.serving.prefix import shared_prefix
from vramsim.serving.probes import rank_config, read_kv_cache, state_per_rank
from vramsim.serving.profile_run import profile_options
from vramsim.serving.speculative import Draft, speculative_draft
from vramsim.serving.traces import RankTraces
from vramsim.workload.build import weight_dtype
from vramsim.workload.models import load_config
from vramsim.workload.targets import Target, resolve_target

__all__ = ["rank_config", "read_kv_cache", "serve"]


def serve(
    model: str | PretrainedConfig,
    *,
    traces: RankTraces | None = None,
    cache: bool | ResultCache = True,
    **options: Any,
) -> ServeReport:
    """The KV cache budget of ``model`` served by vLLM or SGLang on ``device``; ``options`` are
    ``ServeConfig``'s fields. With ``concurrency``, the fewest GPUs that serve that many requests. ``traces``
    keeps the traced runs for further budgets of the same model (``vramsim compare --serve``): one that differs
    only in the KV cache dtype, the memory utilization or ``enforce_eager`` traces nothing again. ``cache`` as
    ``simulate`` takes it: the same request again is answered from the result cache (``vramsim/cache/``), and
    ``traces`` is then left as it was.

    >>> report = serve("meta-llama/Llama-3.2-1B", device="h100", max_model_len=4096)  # doctest: +SKIP
    >>> report.kv_cache_tokens > 0  # doctest: +SKIP
    True
    """
    config = ServeConfig(**options)
    return cached_answer(
        cache,
        ServeReport,
        lambda: request_key("serve", model, config),
        lambda: _served(model, config, RankTraces() if traces is None else traces),
    )


def _served(model: str | PretrainedConfig, config: ServeConfig, traces: RankTraces) -> ServeReport:
    """``serve``'s answer, traced (or from ``traces``' runs)."""
    started = time.perf_counter()
    source = load_config(model) if isinstance(model, str) else model
    name = model if isinstance(model, str) else (getattr(model, "name_or_path", "") or type(model).__name__)
    config = dataclasses.replace(
        config, max_model_len=resolve_max_model_len(name, source, config), quantization=_checkpoint_quantization(source, config)
    )
    if config.concurrency is None:
        return _budget(name, source, config, started, traces)
    assert config.tp is not None
    tried = []
    for tp in _tp_candidates(source):
        try:
            report = _budget(name, source, _with(config, tp=tp, gpus=tp), started, traces)
        except ConfigError:
            continue
        if report.max_concurrency >= 1:
            replicas = math.ceil(config.concurrency / math.floor(report.max_concurrency))
            tried.append((tp * replicas, tp, report))
    if not tried:
        raise ConfigError(f"{name} does not serve one request of {config.max_model_len} tokens on up to 8 x {config.device}")
    gpus, tp, report = min(tried, key=lambda item: (item[0], item[1]))
    return _with_answer(report, gpus=gpus, replicas=gpus // tp, concurrency=config.concurrency)


def _budget(name: str, source: PretrainedConfig, config: ServeConfig, started: float, traces: RankTraces) -> ServeReport:
    """One deployment's budget: the request checked, the engine's settings, then one rank's or each stage's budget."""
    target = resolve_target(config.device)
    profile = target.profile
    if profile.vendor == "cpu" or profile.memory_bytes is None:
        raise ConfigError("serving budgets are for GPUs; pick one of `vramsim gpus`")
    assert config.tp is not None and config.gpus is not None
    if getattr(source, "is_encoder_decoder", False):
        _check_encoder_decoder(name, source, config)
    _check_quantization(config, profile)
    if config.dtype and config.dtype.lower() not in DTYPES:
        raise ConfigError(f"unsupported dtype {config.dtype!r}; choose one of: {', '.join(DTYPES)}")
    dtype = DTYPES[config.dtype.lower()] if config.dtype else _engine_dtype(source, profile.supports_bf16)
    default_tokens, default_seqs = serving.vllm_scheduler_defaults(profile.memory_bytes, profile.label)
    tokens = config.max_num_batched_tokens or default_tokens
    seqs = min(config.max_num_seqs or default_seqs, tokens)
    if multimodal_kind(source) is not None and (config.tp != 1 or config.pp != 1 or config.engine != "vllm"):
        raise UnsupportedError(
            f"{name} is multimodal: its budget is modelled for vLLM on one GPU (the vision tower's tensor-parallel "
            "shards, pipeline stages and SGLang's multimodal profile are not)"
        )
    lora = lora_settings(name, source, config, _vocab(source))
    if lora is not None and (multimodal_kind(source) is not None or getattr(source, "is_encoder_decoder", False)):
        raise UnsupportedError(f"{name}: LoRA slots are modelled for text decoders (not an encoder's or a tower's)")
    rank = rank_config(source, config.tp)
    if config.pp > 1:
        report = pipelined(name, source, rank, config, target, dtype, tokens, seqs, started, traces)
    else:
        report = _rank_budget(name, source, rank, config, target, dtype, tokens, seqs, started, traces, lora)
    return dataclasses.replace(
        report, prefix_caching=not config.no_enable_prefix_caching, shared_prefix=shared_prefix(config, report)
    )


def _rank_budget(
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
    lora: LoraSettings | None,
) -> ServeReport:
    """Without pipeline parallel: one rank's cache, profile run and budget, every rank alike; with ``lora``'s slots
    and the speculative proposer ``config`` names."""
    assert config.tp is not None and config.max_model_len is not None
    encoder_decoder = bool(getattr(source, "is_encoder_decoder", False))

    def checked(measured: list[LayerCache]) -> list[LayerCache]:
        layers = state_per_rank(source, measured, config.tp or 1)
        if config.engine == "sglang" and any(layer.kind == "state" for layer in layers):
            raise UnsupportedError(f"{name} holds recurrent state: SGLang's Mamba state pool is not modelled (use --engine vllm)")
        if layers and all(layer.kind == "state" for layer in layers):
            raise UnsupportedError(
                f"{name} caches recurrent state only: pure Mamba budgets (one page per layer of "
                "max_model_len tokens) are not modelled"
            )
        return layers

    profile_tokens = min(tokens, getattr(source, "max_target_positions", tokens)) if encoder_decoder else tokens
    images = encoder_batch(
        name,
        source,
        config.limit_mm_per_prompt,
        tokens=tokens,
        seqs=seqs,
        max_model_len=config.max_model_len,
        processor_kwargs=config.mm_processor_kwargs,
    )
    multimodal = {} if multimodal_kind(source) is None else {"encoder": images, "tower": images is not None}
    adapters = {} if lora is None else {"lora": lora.key()}
    traced = traces.rank(
        rank,
        target,
        dtype,
        long_tokens=config.max_model_len,
        tokens=profile_tokens,
        seqs=seqs,
        quantization=config.quantization,
        checked=checked,
        encoder_decoder=encoder_decoder,
        **multimodal,
        **adapters,
        **profile_options(config, target, dtype, _vocab(source)),
    )
    draft = speculative_draft(name, source, config, traces, target, dtype, tokens, len(traced.layers))
    layers, peak_notes = traced.layers + (draft.layers if draft else []), traced.notes
    weights = traced.weights_bytes + traced.lora_bytes + (draft.weights_bytes if draft else 0)
    activation = max(traced.activation_peak_bytes, draft.activation_peak_bytes if draft else 0)
    graphs = cuda_graph_estimate(config, traces, rank, target, dtype, tokens, seqs, encoder_decoder=encoder_decoder, **adapters)
    inputs, non_torch = budget_inputs(config, target, weights, activation, layers, tokens, graphs)
    budget, hybrid = engine_budget(name, config.engine, inputs)
    assumptions = [
        *budget_assumptions(config, non_torch, graphs, inputs.context_bytes, peak_notes, target),
        *hybrid_note(hybrid, layers),
        *encoder_note(encoder_decoder, profile_tokens),
        *multimodal_note(multimodal_kind(source), images),
        *adapter_notes(lora, traced.lora_bytes, draft),
    ]
    report = serve_report(name, config, target, inputs, budget, tokens, seqs, started, assumptions=assumptions)
    report = dataclasses.replace(report, lora=_lora_report(lora, traced.lora_bytes), speculative=_draft_report(draft, inputs))
    if images is None:
        return report
    encoder = ServeEncoder(
        modality=images.modality,
        items=images.items,
        width=images.width,
        height=images.height,
        tokens_per_item=images.tokens_per_item,
        crops_per_item=images.crops_per_item,
        peak_bytes=traced.encoder_peak_bytes,
        cache_bytes=traced.encoder_cache_bytes,
    )
    return dataclasses.replace(report, encoder=encoder)


def _lora_report(lora: LoraSettings | None, slot_bytes: int) -> ServeLora | None:
    if lora is None:
        return None
    return ServeLora(
        max_loras=lora.max_loras,
        max_lora_rank=lora.max_lora_rank,
        max_cpu_loras=lora.max_cpu_loras,
        embeddings=lora.embeddings,
        slot_bytes=slot_bytes,
    )


def _draft_report(draft: Draft | None, inputs: serving.BudgetInputs) -> ServeSpeculative | None:
    if draft is None:
        return None
    return ServeSpeculative(
        method=draft.method,
        model=draft.model,
        num_speculative_tokens=draft.num_speculative_tokens,
        weights_bytes=draft.weights_bytes,
        activation_peak_bytes=draft.activation_peak_bytes,
        kv_bytes_per_token=serving.token_bytes(draft.layers, inputs.kv_element_bytes),
    )


def _checkpoint_quantization(source: PretrainedConfig, config: ServeConfig) -> str | None:
    """``--quantization``, or the checkpoint's own where vLLM reads it from the config (``quantization_config``'s
    ``quant_method``: gpt-oss's ``mxfp4``, DeepSeek-V3's ``fp8``); another method named there is refused."""
    found = getattr(source, "quantization_config", None)
    method = found.get("quant_method") if isinstance(found, dict) else getattr(found, "quant_method", None)
    if config.quantization is not None or method is None:
        return config.quantization
    if method not in ("mxfp4", "fp8"):
        raise UnsupportedError(
            f"the checkpoint's quantization_config names {method!r}, not modelled for serving; pass --quantization"
        )
    return str(method)


def _vocab(source: PretrainedConfig) -> int:
    """The vocabulary the sampler's warm-up runs over: the model's own (a decoder's, for an encoder-decoder)."""
    text = getattr(source, "get_text_config", lambda: source)()
    return int(getattr(text, "vocab_size", 0) or 0)


def _check_quantization(config: ServeConfig, profile: Any) -> None:
    """vLLM's Marlin kernels need compute capability 8.0 (``MarlinLinearKernel.get_min_capability``);
    below it vLLM runs other GPTQ/AWQ kernels, which are not modelled."""
    if config.quantization not in ("gptq", "awq"):
        return
    capability = profile.compute_capability
    if profile.vendor != "nvidia" or capability is None or capability < (8, 0):
        raise UnsupportedError(
            f"vLLM serves {config.quantization.upper()} with its Marlin kernel on NVIDIA GPUs of "
            f"compute capability 8.0+; {profile.label} runs other kernels, not modelled"
        )


def _engine_dtype(source: PretrainedConfig, supports_bf16: bool) -> torch.dtype:
    """vLLM's ``--dtype auto``: the checkpoint's dtype, float32 checkpoints (Whisper's) downcast to the
    platform's first supported dtype, bfloat16 on GPUs with native bf16, else float16
    (``_resolve_auto_dtype`` in ``vllm/config/model.py``: "Downcast for float32 models")."""
    stored = weight_dtype(SimulationConfig(task="generate"), source)
    if stored != torch.float32:
        return stored
    return torch.bfloat16 if supports_bf16 else torch.float16


def _check_encoder_decoder(name: str, source: PretrainedConfig, config: ServeConfig) -> None:
    """vLLM V1 serves Whisper as its one encoder-decoder (the scheduler asserts "Whisper is the only
    supported encoder-decoder model" when it sizes cross-attention blocks, ``vllm/v1/core/sched/scheduler.py``);
    T5 and BART ran on the V0 engine only."""
    kind = getattr(source, "model_type", "?")
    if config.engine != "vllm":
        raise UnsupportedError(f"{name} is an encoder-decoder ({kind}): SGLang budgets for encoder-decoders are not modelled")
    if kind != "whisper":
        raise UnsupportedError(
            f"{name} is an encoder-decoder ({kind}) that vLLM V1 does not serve: Whisper is its only "
            "encoder-decoder (T5 and BART ran on the removed V0 engine)"
        )
    if config.tp != 1:
        raise UnsupportedError(f"{name}: tensor parallel for encoder-decoder budgets is not modelled (use --tp 1)")


def _tp_candidates(source: PretrainedConfig) -> list[int]:
    if multimodal_kind(source) is not None:
        return [1]  # a multimodal budget is modelled on one GPU
    heads = getattr(source, "num_attention_heads", 1) or 1
    return [tp for tp in (1, 2, 4, 8) if heads % tp == 0]


def _with(config: ServeConfig, **changes: Any) -> ServeConfig:
    values = {name: getattr(config, name) for name in config.__dataclass_fields__} | changes | {"concurrency": None}
    return ServeConfig(**values)


def _with_answer(report: ServeReport, *, gpus: int, replicas: int, concurrency: int) -> ServeReport:
    return dataclasses.replace(report, gpus=gpus, replicas=replicas, concurrency=concurrency)
