"""Serving budgets: the KV cache a serving engine gets, from the model's real cache and a traced profile forward.

Three traced runs of one tensor-parallel rank's model on the meta device:

- ``read_kv_cache``: a prefill and one decode step with the cache the model builds itself, at
  three prompt lengths; each cache layer's tensors give its bytes per token
  (``estimators/kv_cache.py``).
- ``_profile``: vLLM's profile run, one forward over ``max_num_batched_tokens`` tokens keeping
  logits for ``max_num_seqs`` of them; its steady-state peak over the weights is the activation
  peak.
- the budget arithmetic (``estimators/serving.py``), with vLLM's KV cache groups where layers differ:
  full and sliding attention, attention and Mamba state (pages unified: ``serving.MambaAlignment``),
  Whisper's self- and cross-attention.

A rank's model is the model built from a config with the heads, intermediate sizes and padded
vocabulary one rank holds under tensor parallel, as vLLM's parallel layers split them (KV
heads replicated when ``tp`` exceeds them).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import re
import time
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.analysis.device_memory import device_memory
from vramsim.config import SimulationConfig
from vramsim.config.precision import DTYPES
from vramsim.config.serving import ServeConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators import serving
from vramsim.estimators.assumptions import cuda_context_bytes, overheads_for
from vramsim.estimators.checkpointing import parse_checkpointing, what_if
from vramsim.estimators.kv_cache import CacheSample, CacheTensor, LayerCache, layers_from_samples
from vramsim.results.report import Assumption
from vramsim.results.serving import ServeReport, ServeStage
from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import BEFORE_TRACE
from vramsim.workload.build import check_can_generate, weight_dtype
from vramsim.workload.inputs import default_inputs
from vramsim.workload.models import ModelSource, build_model, load_config
from vramsim.workload.program import Program, StepObserver, tensors_in
from vramsim.workload.targets import Target, resolve_target
from vramsim.workload.tracing import trace_program

__all__ = ["rank_config", "read_kv_cache", "serve"]

PROBE_TOKENS = (16, 32)
"""The two short prompts whose cache growth gives bytes per token (a third, long one finds windows)."""

VLLM_QUANTIZED_LAYERS = {"gptq": "gptq", "awq": "awq", "bitsandbytes": "nf4-dq"}
"""vLLM's ``--quantization`` -> the trace side's layers holding the same tensors (``vramsim/workload/quantization/weights.py``).

- gptq, awq: vLLM runs them as ``gptq_marlin`` / ``awq_marlin`` on GPUs of compute capability 8.0+
  (``GPTQMarlinLinearMethod``, ``AWQMarlinLinearMethod`` with ``MarlinLinearKernel``): the packed
  int32 ``qweight`` repacked for Marlin (same bytes), ``scales`` [groups, out] in the model's dtype,
  AWQ's packed ``qzeros``, act order's ``g_idx`` and sort indices, an int32 workspace per layer;
  the layers ``marlin_linear.MarlinLinear`` holds (4 bits, groups of 128, as the common checkpoints).
- bitsandbytes: vLLM's in-flight quantization (``bitsandbytes_loader.py``: ``quantize_4bit(...,
  compress_statistics=True, quant_type="nf4")``): NF4 with double-quantized absmax, the layers
  bitsandbytes' ``Linear4bit`` holds.

Under tensor parallel each rank's layers are built at its shard's shape (``rank_config``), so each
rank packs its own shard, as vLLM's column- and row-parallel layers load it."""

_ALLOCATION_ROUND = 512
"""The CUDA caching allocator rounds every block up to 512 B (``kMinBlockSize``)."""


def serve(model: str | PretrainedConfig, **options: Any) -> ServeReport:
    """The KV cache budget of ``model`` served by vLLM or SGLang on ``device``; ``options`` are
    ``ServeConfig``'s fields. With ``concurrency``, the fewest GPUs that serve that many requests.

    >>> report = serve("meta-llama/Llama-3.2-1B", device="h100", max_model_len=4096)  # doctest: +SKIP
    >>> report.kv_cache_tokens > 0  # doctest: +SKIP
    True
    """
    config = ServeConfig(**options)
    started = time.perf_counter()
    source = load_config(model) if isinstance(model, str) else model
    name = model if isinstance(model, str) else (getattr(model, "name_or_path", "") or type(model).__name__)
    if config.concurrency is None:
        return _budget(name, source, config, started)
    assert config.tp is not None
    tried = []
    for tp in _tp_candidates(source):
        try:
            report = _budget(name, source, _with(config, tp=tp, gpus=tp), started)
        except ConfigError:
            continue
        if report.max_concurrency >= 1:
            replicas = math.ceil(config.concurrency / math.floor(report.max_concurrency))
            tried.append((tp * replicas, tp, report))
    if not tried:
        raise ConfigError(f"{name} does not serve one request of {config.max_model_len} tokens on up to 8 x {config.device}")
    gpus, tp, report = min(tried, key=lambda item: (item[0], item[1]))
    return _with_answer(report, gpus=gpus, replicas=gpus // tp, concurrency=config.concurrency)


def read_kv_cache(
    model: ModelSource, *, device: str = "h100", dtype: torch.dtype | None = None, long_tokens: int = 4096, tp: int = 1
) -> list[LayerCache]:
    """Bytes per token per layer of the cache ``model`` builds, from traced prefills of 16, 32
    and ``long_tokens`` tokens (each followed by one decode step) on one tensor-parallel rank."""
    source = load_config(model) if isinstance(model, (str,)) else model
    target = resolve_target(device)
    if isinstance(source, PretrainedConfig):
        dtype = dtype or weight_dtype(SimulationConfig(task="generate"), source)
        source = rank_config(source, tp)
    lengths = sorted({*PROBE_TOKENS, max(long_tokens, PROBE_TOKENS[-1] + 1)})
    samples: list[CacheSample] = []
    for tokens in lengths:
        samples.extend(_probe(source, dtype, target, tokens))
    return layers_from_samples(samples)


def rank_config(config: PretrainedConfig, tp: int) -> PretrainedConfig:
    """The config of one tensor-parallel rank: heads, KV heads, intermediate sizes and the
    (padded) vocabulary divided as vLLM's parallel layers divide them."""
    config = copy.deepcopy(config)
    vocab = getattr(config, "vocab_size", None)
    if isinstance(vocab, int):
        config.vocab_size = math.ceil(vocab / serving.VLLM_VOCAB_PADDING) * serving.VLLM_VOCAB_PADDING // tp
    if tp == 1:
        return config
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(heads, int) or heads % tp:
        raise ConfigError(f"tensor parallel {tp} must divide the {heads} attention heads")
    hidden = getattr(config, "hidden_size", None)
    if getattr(config, "head_dim", None) is None and isinstance(hidden, int):
        config.head_dim = hidden // heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    if kv >= tp and kv % tp:
        raise ConfigError(f"tensor parallel {tp} must divide the {kv} KV heads")
    config.num_attention_heads = heads // tp
    config.num_key_value_heads = max(kv // tp, 1)  # vLLM replicates KV heads when tp exceeds them
    for name in ("intermediate_size", "moe_intermediate_size"):
        size = getattr(config, name, None)
        if isinstance(size, int):
            if size % tp:
                raise ConfigError(f"tensor parallel {tp} must divide {name} {size}")
            setattr(config, name, size // tp)
    return config


def _budget(name: str, source: PretrainedConfig, config: ServeConfig, started: float) -> ServeReport:
    target = resolve_target(config.device)
    profile = target.profile
    if profile.vendor == "cpu" or profile.memory_bytes is None:
        raise ConfigError("serving budgets are for GPUs; pick one of `vramsim gpus`")
    assert config.tp is not None and config.gpus is not None
    encoder_decoder = bool(getattr(source, "is_encoder_decoder", False))
    if encoder_decoder:
        _check_encoder_decoder(name, source, config)
    _check_quantization(config, profile)
    if config.dtype and config.dtype.lower() not in DTYPES:
        raise ConfigError(f"unsupported dtype {config.dtype!r}; choose one of: {', '.join(DTYPES)}")
    dtype = DTYPES[config.dtype.lower()] if config.dtype else _engine_dtype(source, profile.supports_bf16)
    default_tokens, default_seqs = serving.vllm_scheduler_defaults(profile.memory_bytes, profile.label)
    tokens = config.max_num_batched_tokens or default_tokens
    seqs = min(config.max_num_seqs or default_seqs, tokens)
    rank = rank_config(source, config.tp)
    if config.pp > 1:
        return _pipelined(name, source, rank, config, target, dtype, tokens, seqs, started)
    layers = _state_per_rank(
        source, read_kv_cache(rank, device=config.device, dtype=dtype, long_tokens=config.max_model_len), config.tp
    )
    if config.engine == "sglang" and any(layer.kind == "state" for layer in layers):
        raise UnsupportedError(f"{name} holds recurrent state: SGLang's Mamba state pool is not modelled (use --engine vllm)")
    if layers and all(layer.kind == "state" for layer in layers):
        raise UnsupportedError(
            f"{name} caches recurrent state only: pure Mamba budgets (one page per layer of "
            "max_model_len tokens) are not modelled"
        )
    profile_tokens = min(tokens, getattr(source, "max_target_positions", tokens)) if encoder_decoder else tokens
    weights, activation, peak_notes = _profile(
        rank, target, dtype, profile_tokens, seqs, config.quantization, encoder_decoder=encoder_decoder
    )
    inputs, non_torch = _inputs(config, target, weights, activation, layers, tokens)
    try:
        budget = serving.vllm_budget(inputs) if config.engine == "vllm" else serving.sglang_budget(inputs)
        hybrid = serving.hybrid_groups(layers, inputs.kv_element_bytes, inputs.block_size) if config.engine == "vllm" else None
    except ValueError as error:
        raise UnsupportedError(f"{name}: {error}") from None
    return _report(
        name,
        config,
        target,
        inputs,
        budget,
        tokens,
        seqs,
        started,
        assumptions=[
            *_assumptions(config, non_torch, inputs.cuda_graph_bytes, inputs.context_bytes, peak_notes),
            *_hybrid_note(hybrid, layers),
            *_encoder_note(encoder_decoder, profile_tokens),
        ],
    )


def _inputs(
    config: ServeConfig, target: Target, weights: int, activation: int, layers: list[LayerCache], tokens: int
) -> tuple[serving.BudgetInputs, list[tuple[str, int, str]]]:
    """One rank's budget terms, and the memory outside torch among them."""
    profile = target.profile
    assert profile.memory_bytes is not None and config.tp is not None
    element = None if config.kv_cache_dtype == "auto" else serving.KV_CACHE_DTYPE_BYTES[config.kv_cache_dtype]
    non_torch = _non_torch(target, config.tp, config.engine, config.pp)
    graphs = 0 if config.enforce_eager or config.engine == "sglang" else serving.VLLM_CUDA_GRAPH_BYTES
    utilization = config.gpu_memory_utilization or (
        serving.VLLM_GPU_MEMORY_UTILIZATION if config.engine == "vllm" else serving.sglang_mem_fraction(config.tp)
    )
    inputs = serving.BudgetInputs(
        total_bytes=profile.memory_bytes,
        utilization=utilization,
        weights_bytes=weights,
        activation_peak_bytes=activation if config.engine == "vllm" else 0,
        non_torch_bytes=sum(b for _, b, _ in non_torch),
        cuda_graph_bytes=graphs,
        context_bytes=cuda_context_bytes(profile, training=False),
        layers=layers,
        kv_element_bytes=element,
        block_size=serving.VLLM_BLOCK_SIZE if config.engine == "vllm" else 1,
        max_model_len=config.max_model_len,
        max_num_batched_tokens=tokens,
    )
    return inputs, non_torch


def _pipelined(
    name: str,
    source: PretrainedConfig,
    rank: PretrainedConfig,
    config: ServeConfig,
    target: Target,
    dtype: torch.dtype,
    tokens: int,
    seqs: int,
    started: float,
) -> ServeReport:
    """vLLM with pipeline parallel: each stage's rank holds its decoder layers (``serving.pp_partition``), the
    first also the embedding, the last the final norm and the head (and the embedding when they are tied);
    each profiles and budgets its own memory, and every stage gets the fewest blocks any stage can hold
    (``get_kv_cache_configs``, ``vllm/v1/core/kv_cache_utils.py``: "Change the num_blocks of each rank to the
    smallest among all ranks"), so the stage with the fewest sets the tokens and the concurrency."""
    if config.engine != "vllm":
        raise UnsupportedError(f"{name}: pipeline-parallel budgets are modelled for vLLM only (use --engine vllm)")
    if getattr(source, "is_encoder_decoder", False):
        raise UnsupportedError(f"{name} is an encoder-decoder: vLLM serves it without pipeline parallel (use --pp 1)")
    count = getattr(rank, "num_hidden_layers", None)
    if not isinstance(count, int):
        raise UnsupportedError(f"{name}'s config names no num_hidden_layers: its pipeline stages cannot be built")
    try:
        bounds = serving.pp_partition(count, config.pp)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None
    tied = bool(getattr(source, "tie_word_embeddings", False))
    stages, picked = [], None
    for index, (first, last) in enumerate(bounds):
        stage = _stage_config(rank, first, last)
        layers = read_kv_cache(stage, device=config.device, dtype=dtype, long_tokens=config.max_model_len)
        if any(layer.kind == "state" for layer in layers):
            raise UnsupportedError(
                f"{name} holds recurrent state: pipeline-parallel budgets of Mamba hybrids are not modelled (use --pp 1)"
            )
        head = index == len(bounds) - 1
        weights, activation, notes = _profile(
            stage, target, dtype, tokens, seqs, config.quantization, embedding=index == 0 or (head and tied), head=head
        )
        inputs, non_torch = _inputs(config, target, weights, activation, layers, tokens)
        try:
            budget = serving.vllm_budget(inputs)
            hybrid = serving.hybrid_groups(layers, inputs.kv_element_bytes, inputs.block_size)
        except ValueError as error:
            raise UnsupportedError(f"{name}: {error}") from None
        stages.append(
            ServeStage(
                rank=index,
                layers=(first, last),
                weights_bytes=weights,
                activation_peak_bytes=activation,
                kv_cache_bytes=budget.kv_cache_bytes,
                kv_blocks=budget.kv_blocks,
            )
        )
        if picked is None or budget.kv_blocks < picked[1].kv_blocks:
            picked = (inputs, budget, non_torch, notes, hybrid, layers)
    assert picked is not None
    inputs, budget, non_torch, notes, hybrid, layers = picked
    note = Assumption(
        name="pipeline_stages",
        detail=f"{config.pp} stages of decoder layers "
        f"{', '.join(f'{a}-{b - 1}' for a, b in bounds)} (vLLM's get_pp_indices); each stage's profile "
        "forward is traced as a model of its layers with the embedding lookup and the logits, which "
        "vLLM's middle stages replace by receiving hidden states and residual; the figures are the "
        "stage with the fewest blocks",
    )
    return dataclasses.replace(
        _report(
            name,
            config,
            target,
            inputs,
            budget,
            tokens,
            seqs,
            started,
            assumptions=[
                *_assumptions(config, non_torch, inputs.cuda_graph_bytes, inputs.context_bytes, notes),
                *_hybrid_note(hybrid, layers),
                note,
            ],
        ),
        stages=stages,
    )


def _stage_config(rank: PretrainedConfig, first: int, last: int) -> PretrainedConfig:
    """A pipeline stage's model: the decoder layers ``[first, last)`` (per-layer lists cut to them)."""
    stage = copy.deepcopy(rank)
    stage.num_hidden_layers = last - first
    types = getattr(stage, "layer_types", None)
    if isinstance(types, list):
        stage.layer_types = types[first:last]
    return stage


def _report(
    name: str,
    config: ServeConfig,
    target: Target,
    inputs: serving.BudgetInputs,
    budget: serving.Budget,
    tokens: int,
    seqs: int,
    started: float,
    *,
    assumptions: list[Assumption],
) -> ServeReport:
    assert config.gpus is not None and config.tp is not None
    layers = inputs.layers
    return ServeReport(
        model=name,
        engine=config.engine,
        target=target.name,
        gpus=config.gpus,
        tp=config.tp,
        pp=config.pp,
        max_model_len=config.max_model_len,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        kv_cache_dtype=config.kv_cache_dtype,
        utilization=inputs.utilization,
        total_bytes=inputs.total_bytes,
        usable_bytes=budget.usable_bytes,
        weights_bytes=inputs.weights_bytes,
        activation_peak_bytes=inputs.activation_peak_bytes,
        non_torch_bytes=inputs.non_torch_bytes,
        cuda_graph_bytes=inputs.cuda_graph_bytes,
        context_bytes=inputs.context_bytes,
        kv_cache_bytes=budget.kv_cache_bytes,
        kv_bytes_per_token=serving.token_bytes(layers, inputs.kv_element_bytes),
        block_size=budget.block_size,
        block_bytes=budget.block_bytes,
        kv_blocks=budget.kv_blocks,
        kv_cache_tokens=budget.kv_cache_tokens,
        request_bytes=budget.request_bytes,
        max_concurrency=budget.max_concurrency,
        layers=layers,
        assumptions=assumptions,
        trace_seconds=round(time.perf_counter() - started, 3),
    )


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
    positions = getattr(source, "max_target_positions", None)
    if isinstance(positions, int) and config.max_model_len > positions:
        raise ConfigError(
            f"{name}'s decoder holds {positions} positions (max_target_positions), and vLLM refuses a "
            f"longer max_model_len: pass --max-model-len {positions} or less"
        )


def _state_per_rank(source: PretrainedConfig, layers: list[LayerCache], tp: int) -> list[LayerCache]:
    """Recurrent state on one tensor-parallel rank. ``rank_config`` splits attention heads, not a Mamba
    mixer's, so the state traced is the whole model's; vLLM splits its heads and conv channels over
    the ranks (``MambaStateShapeCalculator.mamba2_state_shape``: ``divide(conv_dim, tp)``, ``num_heads // tp``),
    exactly when the groups divide evenly (else it replicates groups, not modelled)."""
    if tp == 1 or not any(layer.kind == "state" for layer in layers):
        return layers
    groups = next(
        (getattr(source, n) for n in ("mamba_n_groups", "n_groups") if isinstance(getattr(source, n, None), int)), None
    )  # Mamba2 mixers have groups; Mamba1 mixers split their inner size alone
    if groups is not None and groups % tp:
        raise UnsupportedError(
            f"tensor parallel {tp} does not divide the {groups} Mamba groups (vLLM then replicates "
            "groups on every rank: extra_groups_for_head_shards, not modelled)"
        )
    split = []
    for layer in layers:
        if layer.kind == "state":
            if layer.state_elements % tp or layer.conv_column_elements % tp:
                raise UnsupportedError(f"tensor parallel {tp} does not divide layer {layer.layer}'s recurrent state")
            layer = dataclasses.replace(
                layer,
                state_bytes=layer.state_bytes // tp,
                state_elements=layer.state_elements // tp,
                conv_column_elements=layer.conv_column_elements // tp,
            )
        split.append(layer)
    return split


def _probe(source: Any, dtype: torch.dtype | None, target: Target, tokens: int) -> list[CacheSample]:
    """Trace a prefill of ``tokens`` tokens and one decode step; sample the cache it left."""
    samples: list[CacheSample] = []
    with target.emulation():
        model = build_model(source, device="meta", dtype=dtype, task="generate")
        check_can_generate(model)
        model.eval()
        with torch.device("meta"):
            batch = default_inputs(model, 1, tokens, train=False)
        weights = next(model.parameters()).dtype
        batch = {k: v.to(weights) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in batch.items()}
        latent = _latent_widths(model)
        program = Program(
            modules={"": model},
            step=lambda p, o: _prefill_decode(p, o, samples, latent),
            batch=batch,
            loss=None,
            optimizer=None,
            autocast=contextlib.nullcontext,
            max_new_tokens=1,
            steps=1,
        )
        trace_program(program, devices=target.counted_devices, workspaces=target.rules.workspaces)
    return samples


def _prefill_decode(program: Program, observer: StepObserver, samples: list[CacheSample], latent: dict[int, int]) -> None:
    """Prefill with the model's own cache, then decode one token; record every cache layer."""
    observer.set_phase(Phase.FORWARD)
    model = program.model
    accepted = inspect.signature(model.forward).parameters
    keep = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    with torch.no_grad():
        outputs = model(**program.batch, use_cache=True, **keep)
        cache = getattr(outputs, "cache", None) or getattr(outputs, "past_key_values", None)  # renamed in transformers 5.2x
        if cache is None:
            raise UnsupportedError(f"{type(model).__name__} returned no cache from a prefill with use_cache=True")
        decoder = "decoder_input_ids" if "decoder_input_ids" in program.batch else "input_ids"
        step: dict[str, Any] = {
            decoder: outputs.logits[:, -1:].argmax(dim=-1),
            "use_cache": True,
            **keep,
            "cache" if "cache" in accepted else "past_key_values": cache,
        }
        encoded = getattr(outputs, "encoder_last_hidden_state", None)
        if encoded is not None:
            step["encoder_outputs"] = (encoded,)
        del outputs
        outputs = model(**step)
        observer.mark(tensors_in(cache), Category.KV_CACHE)
        prompt = program.batch[decoder].shape[-1]
        encoder_tokens = encoded.shape[1] if encoded is not None else 0
        samples.extend(_samples(cache, prompt + 1, encoder_tokens, latent))
        del outputs, cache, step, encoded


def _samples(cache: Any, tokens: int, encoder_tokens: int, latent: dict[int, int]) -> list[CacheSample]:
    """Each layer of ``cache``: its tensors' shapes, dtypes and own bytes."""
    if hasattr(cache, "self_attention_cache"):
        found = [(False, layer) for layer in cache.self_attention_cache.layers]
        found += [(True, layer) for layer in cache.cross_attention_cache.layers]
    else:
        found = [(False, layer) for layer in cache.layers]
    samples, index = [], {False: 0, True: 0}
    for cross, layer in found:
        tensors = tuple(
            CacheTensor(shape=tuple(t.shape), dtype=str(t.dtype).removeprefix("torch."), nbytes=t.numel() * t.element_size())
            for t in {id(t): t for t in tensors_in(layer)}.values()
        )
        number = index[cross]
        index[cross] += 1
        samples.append(
            CacheSample(
                layer=number,
                cross=cross,
                cache_class=type(layer).__name__,
                tokens=encoder_tokens if cross else tokens,
                tensors=tensors,
                latent_width=None if cross else latent.get(number),
                conv_column_elements=_conv_column_elements(layer),
            )
        )
    return samples


def _conv_column_elements(layer: Any) -> int:
    """One time column of a recurrent cache layer's convolution states (``conv_states``, shaped
    ``(batch, conv_dim, conv_kernel)``), which serving engines keep one column fewer of."""
    convs = {id(t): t for t in tensors_in(getattr(layer, "conv_states", None)) if t.dim() >= 2}.values()
    return sum(t.numel() // t.shape[-1] for t in convs)


_LAYER_NUMBER = re.compile(r"layers\.(\d+)\.")


def _latent_widths(model: torch.nn.Module) -> dict[int, int]:
    """Per decoder layer, the width of an MLA attention's compressed KV (DeepSeek-V2/V3's
    ``kv_a_proj_with_mqa``: latent plus the shared rope key), which serving engines cache."""
    widths = {}
    for name, module in model.named_modules():
        match = _LAYER_NUMBER.search(name + ".")
        if name.endswith("kv_a_proj_with_mqa") and match and isinstance(module, torch.nn.Linear):
            widths[int(match.group(1))] = module.out_features
    return widths


def _profile(
    rank: PretrainedConfig,
    target: Target,
    dtype: torch.dtype | None,
    tokens: int,
    seqs: int,
    quantization: str | None,
    *,
    encoder_decoder: bool = False,
    embedding: bool = True,
    head: bool = True,
) -> tuple[int, int, list[str]]:
    """vLLM's profile run on one rank: ``(weights, activation peak over them, trace notes)``; a pipeline
    stage without the ``embedding`` or the ``head`` does not count their weights (vLLM's ``PPMissingLayer``). An
    encoder-decoder's (Whisper's) runs the encoder over one input of the encoder's length, as the
    encoder budget of ``profile_run`` (1500 tokens, one 30-s clip) allows, keeping its output for a
    decoder forward over ``tokens`` tokens: the model's own default inputs, one sequence."""
    from vramsim.analysis.traced import build_and_trace

    def inputs(batch: int, length: int) -> dict[str, Any]:
        # vLLM's profile run writes no KV cache: no transformers cache either
        return {"input_ids": torch.zeros(batch, length, dtype=torch.long), "logits_to_keep": seqs, "use_cache": False}

    def encoder_decoder_inputs(batch: int, length: int) -> dict[str, Any]:
        # one 30-s clip: Whisper's feature extractor pads to 2 x max_source_positions mel frames
        frames = 2 * rank.max_source_positions
        return {
            "input_features": torch.zeros(batch, rank.num_mel_bins, frames, dtype=dtype),
            "decoder_input_ids": torch.zeros(batch, length, dtype=torch.long),
            "use_cache": False,
        }

    config = SimulationConfig(
        task="forward",
        batch_size=1,
        seq_len=tokens,
        device=target.name,
        dtype=dtype,
        inputs=encoder_decoder_inputs if encoder_decoder else inputs,
        optimizer=None,
        quantization=VLLM_QUANTIZED_LAYERS.get(quantization or ""),
    )
    program, _, trace = build_and_trace(rank, config, target, checkpointing="marked")
    outcome = what_if(build_graph(trace), parse_checkpointing("none"))
    memory = device_memory(outcome.timeline, target, training=False)
    resident = sum(_rounded(s.nbytes) for s in trace.storages if s.alloc_clock == BEFORE_TRACE and s.free_clock is None)
    weights = sum(
        _rounded(s.nbytes)
        for s in trace.storages
        if s.alloc_clock == BEFORE_TRACE and s.free_clock is None and s.category in (Category.PARAMETER, Category.BUFFER)
    )
    if quantization == "fp8":
        weights -= _fp8_savings(program.model)
    weights -= _unheld(program.model, embedding=embedding, head=head)
    return weights, memory.peak_bytes - resident, list(trace.notes)


def _unheld(model: Any, *, embedding: bool, head: bool) -> int:
    """Bytes of the input embedding and the output head a pipeline stage does not hold (a tied pair is one
    tensor: dropped only when the stage holds neither)."""
    pairs = [
        (m.weight, held)
        for m, held in ((model.get_input_embeddings(), embedding), (model.get_output_embeddings(), head))
        if m is not None
    ]
    kept = {id(weight) for weight, held in pairs if held}
    dropped = {id(weight): weight for weight, held in pairs if not held and id(weight) not in kept}
    return sum(_rounded(w.numel() * w.element_size()) for w in dropped.values())


def _fp8_savings(model: torch.nn.Module) -> int:
    """Bytes FP8 weights save, as vLLM's ``Fp8LinearMethod`` and ``Fp8MoEMethod`` store them: linear
    weights (not the LM head, not MoE routers) and fused expert weights in one byte per element plus
    one fp32 scale per weight (per expert); embeddings, norms and routers keep their dtype."""
    getter = getattr(model, "get_output_embeddings", None)
    output = getter() if callable(getter) else None
    saved = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            if module is output or name.endswith((".gate", ".router")):
                continue
            weights = [(module.weight, 1)]
        else:  # fused experts: (experts, out, in) parameters
            weights = [(p, p.shape[0]) for p in module.parameters(recurse=False) if p.dim() == 3]
        for weight, scales in weights:
            saved += _rounded(weight.numel() * weight.element_size()) - _rounded(weight.numel()) - _rounded(4 * scales)
    return saved


def _rounded(nbytes: int) -> int:
    return -(-nbytes // _ALLOCATION_ROUND) * _ALLOCATION_ROUND


def _non_torch(target: Target, tp: int, engine: str, pp: int) -> list[tuple[str, int, str]]:
    """Memory outside torch an engine adds after its first snapshot: the NCCL buffers of each group a rank
    belongs to (tensor parallel; pipeline parallel's, which sends the hidden states on) and vLLM's
    custom all-reduce buffer, with tensor parallel."""
    found = [
        (f"{o.name} ({kind} group)" if pp > 1 else o.name, o.bytes, o.source)
        for kind, size in (("tensor-parallel", tp), ("pipeline", pp))
        if size > 1
        for o in overheads_for(target.profile, world_size=size)
        if "NCCL" in o.name or "RCCL" in o.name
    ]
    if tp > 1 and engine == "vllm":
        found.append(
            (
                "vLLM custom all-reduce buffer",
                serving.VLLM_CUSTOM_ALLREDUCE_BYTES,
                "custom_all_reduce.py max_size=8192*1024, cudaMalloc outside torch",
            )
        )
    return found


def _assumptions(
    config: ServeConfig, non_torch: list[tuple[str, int, str]], graphs: int, context: int, notes: list[str]
) -> list[Assumption]:
    found = [Assumption(name=name, detail=source, bytes=nbytes) for name, nbytes, source in non_torch]
    if graphs:
        found.append(
            Assumption(
                name="cuda_graph_pool",
                bytes=graphs,
                detail="estimators/serving.py "
                "VLLM_CUDA_GRAPH_BYTES: 0.21 GiB measured for Llama-3.2-1B (vllm#11349); subtracted "
                "as vLLM >= 0.19 does; --enforce-eager drops it",
            )
        )
    found.append(
        Assumption(
            name="cuda_context",
            bytes=context,
            detail="estimators/assumptions.py "
            "cuda_context_bytes (context and loaded kernels); "
            "vLLM's first snapshot already holds it, so it must fit in what utilization leaves out"
            if config.engine == "vllm"
            else "SGLang's mem_fraction_static applies to the memory free after it",
        )
    )
    if config.quantization in VLLM_QUANTIZED_LAYERS:
        found.append(
            Assumption(
                name=f"{config.quantization}_weights",
                detail=f"vLLM --quantization {config.quantization} "
                f"as the trace side's {VLLM_QUANTIZED_LAYERS[config.quantization]} layers hold it "
                "(vramsim/serving/budget.py VLLM_QUANTIZED_LAYERS); vLLM fuses q/k/v and gate/up into one "
                "layer each, so it holds fewer per-layer workspaces and rounds fewer tensors",
            )
        )
    if config.quantization == "fp8":
        found.append(
            Assumption(
                name="fp8_weights",
                detail="linear weights (not the LM head or MoE routers) and fused "
                "expert weights in one byte per element plus one fp32 scale per weight (per expert), "
                "as vLLM's Fp8LinearMethod / Fp8MoEMethod store them; the profile forward is "
                "traced with the model's dtype, so FP8 GEMMs' input-quantization copies are not "
                "counted",
            )
        )
    found.append(
        Assumption(
            name="profile_forward",
            detail="one sequence of max_num_batched_tokens tokens keeping "
            "logits for max_num_seqs rows; vLLM's sampler warm-up and attention-backend metadata "
            "buffers are not traced"
            if config.engine == "vllm"
            else "SGLang subtracts no profile forward from its token pool",
        )
    )
    found.append(
        Assumption(
            name="kv_layers",
            detail="bytes per token per layer measured from the cache transformers "
            "builds at three prompt lengths; sliding layers need their window plus one step's tokens "
            "per request (SlidingWindowSpec), state layers their state once; MLA layers store the "
            "compressed latent (kv_a_proj_with_mqa output)",
        )
    )
    found.extend(Assumption(name="data_dependent", detail=note) for note in dict.fromkeys(notes))
    return found


def _hybrid_note(hybrid: serving.HybridGroups | None, layers: list[LayerCache]) -> list[Assumption]:
    if hybrid is None:
        return []
    padding = f", {hybrid.padding_layers} of them padding that takes pages too" if hybrid.padding_layers else ""
    kinds = " and ".join(dict.fromkeys(layer.kind for layer in layers))
    found = [
        Assumption(
            name="kv_cache_groups",
            detail=f"vLLM's hybrid KV cache manager: the {len(layers)} {kinds} "
            f"layers in {len(hybrid.groups)} groups of {hybrid.group_size}{padding}; blocks of one "
            "layer's page shared by every group, tokens as vLLM's log prints them (blocks // groups x "
            "block size)",
        )
    ]
    if hybrid.mamba is not None:
        mamba = hybrid.mamba
        found.append(
            Assumption(
                name="mamba_page",
                bytes=mamba.page_bytes,
                detail=f"attention block size set to "
                f"{mamba.block_size} tokens so one attention page holds one Mamba state of "
                f"{mamba.mamba_page_bytes:,} B (conv state of conv_kernel - 1 columns plus SSM state), "
                f"padded by {mamba.padding_percent:.2f}% (HybridAttentionMambaModelConfig); each "
                "request takes one page per Mamba group",
            )
        )
    return found


def _encoder_note(encoder_decoder: bool, tokens: int) -> list[Assumption]:
    if not encoder_decoder:
        return []
    return [
        Assumption(
            name="encoder_decoder",
            detail="cross-attention layers hold the encoder's tokens, measured from "
            "the traced cache (CrossAttentionSpec: cdiv(max_num_encoder_input_tokens, block_size) blocks per "
            "request); the profile forward runs the encoder on one input of the encoder's length and the "
            f"decoder on {tokens} tokens in one sequence (its positions stop at max_target_positions), where "
            "vLLM's dummy run feeds max_num_batched_tokens tokens",
        )
    ]


def _tp_candidates(source: PretrainedConfig) -> list[int]:
    heads = getattr(source, "num_attention_heads", 1) or 1
    return [tp for tp in (1, 2, 4, 8) if heads % tp == 0]


def _with(config: ServeConfig, **changes: Any) -> ServeConfig:
    values = {name: getattr(config, name) for name in config.__dataclass_fields__} | changes | {"concurrency": None}
    return ServeConfig(**values)


def _with_answer(report: ServeReport, *, gpus: int, replicas: int, concurrency: int) -> ServeReport:
    return dataclasses.replace(report, gpus=gpus, replicas=replicas, concurrency=concurrency)
