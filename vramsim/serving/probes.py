"""The probes traced: the KV cache a model builds itself, read from prefills and one decode step on a rank.

A prefill and one decode step with the cache the model builds itself, at three prompt lengths; each
cache layer's tensors give its bytes per token (``estimators/kv_cache.py``). A rank's model is the
model built from a config with the heads, intermediate sizes and padded vocabulary one rank holds
under tensor parallel, as vLLM's parallel layers split them (KV heads replicated when ``tp``
exceeds them).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import re
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators import serving
from vramsim.estimators.kv_cache import CacheSample, CacheTensor, LayerCache, layers_from_samples
from vramsim.serving.multimodal import multimodal_kind
from vramsim.tracer.categories import Category, Phase
from vramsim.workload.build import check_can_generate, weight_dtype
from vramsim.workload.inputs import default_inputs
from vramsim.workload.models import ModelSource, build_model, load_config
from vramsim.workload.program import Program, StepObserver, tensors_in
from vramsim.workload.targets import Target, resolve_target
from vramsim.workload.tracing import trace_program

__all__ = ["PROBE_TOKENS", "rank_config", "read_kv_cache", "state_per_rank"]

PROBE_TOKENS = (16, 32)
"""The two short prompts whose cache growth gives bytes per token (a third, long one finds windows)."""


def read_kv_cache(
    model: ModelSource, *, device: str = "h100", dtype: torch.dtype | None = None, long_tokens: int = 4096, tp: int = 1
) -> list[LayerCache]:
    """Bytes per token per layer of the cache ``model`` builds, from traced prefills of 16, 32
    and ``long_tokens - 1`` tokens, each followed by one decode step (the longest request is ``long_tokens``
    tokens, its last one at the last position), on one tensor-parallel rank."""
    source = load_config(model) if isinstance(model, (str,)) else model
    target = resolve_target(device)
    if isinstance(source, PretrainedConfig):
        dtype = dtype or weight_dtype(SimulationConfig(task="generate"), source)
        source = rank_config(source, tp)
    lengths = sorted({*PROBE_TOKENS, max(long_tokens - 1, PROBE_TOKENS[-1] + 1)})
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


def state_per_rank(source: PretrainedConfig, layers: list[LayerCache], tp: int) -> list[LayerCache]:
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
            # a multimodal model caches its text's tokens: the probes feed text only (images are tokens like others)
            text_only = multimodal_kind(model.config) is not None
            batch = (
                {"input_ids": torch.zeros(1, tokens, dtype=torch.long)}
                if text_only
                else default_inputs(model, 1, tokens, train=False)
            )
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
