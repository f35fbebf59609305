"""Speculative decoding in vLLM's budget (``--speculative-config``): what the proposer holds on the device.

- ``ngram`` proposes on the host (``NgramProposer``, ``vllm/v1/spec_decode/ngram_proposer.py``: numba over the
  token ids in host memory): nothing on the device.
- ``draft_model`` (vLLM 0.15 on: ``DraftModelProposer``, vllm#24322; 0.14.1 still refuses it, "Speculative decoding
  with draft model is not supported yet") loads the draft beside the target in the worker's ``load_model``, at the target's
  tensor-parallel size and dtype, and its attention layers join the target's in the KV cache config: every block
  holds a block of tokens in every layer of both models (one group of full-attention layers,
  ``UniformTypeKVCacheSpecs``), so the draft's bytes per token add to the target's and the blocks are fewer. In the
  profile run the drafter's ``dummy_run`` runs the draft over the same ``max_num_batched_tokens`` after the target's
  forward, whose hidden states are still held; the sampler's warm-up comes after it. So the activation peak is the
  larger of the target's and the draft's forward plus the target's hidden states (an assumption: the drafter's dummy
  run as EAGLE's, ``GPUModelRunner._dummy_run``). The draft captures no CUDA graphs of its own: its proposer's
  ``CudagraphDispatcher`` gets its keys only for EAGLE-family proposers (``_check_and_update_cudagraph_mode`` calls
  ``drafter.initialize_cudagraph_keys`` under ``use_eagle()``, in 0.21 also ``uses_extract_hidden_states()``; read in
  0.15.0, 0.16.0 and 0.21.0), so its ``dispatch`` answers ``NONE`` and the draft runs eagerly, in the graph capture's
  warm-ups too; ``profile_cudagraph_memory`` captures the target's graphs alone.
- EAGLE, EAGLE-3, Medusa, MLP speculators and MTP heads are refused: their heads' configs are not bundled.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from transformers import PretrainedConfig

from vramsim.config.serving import ServeConfig, parse_speculative_config
from vramsim.errors import UnsupportedError
from vramsim.estimators.kv_cache import LayerCache
from vramsim.serving.multimodal import multimodal_kind
from vramsim.serving.probes import rank_config
from vramsim.serving.traces import RankTraces
from vramsim.workload.models import load_config
from vramsim.workload.targets import Target

__all__ = ["DRAFT_MODEL_FIRST_RELEASE", "Draft", "speculative_draft"]

DRAFT_MODEL_FIRST_RELEASE = (0, 15)
"""The first release serving a draft model on the V1 engine, read from the published wheels: 0.15.0 ships
``vllm/v1/spec_decode/draft_model.py`` (``DraftModelProposer``, vllm#24322), while 0.14.0 and 0.14.1 have none and
their ``SpeculativeConfig`` raises "Speculative decoding with draft model is not supported yet"."""

_ALLOCATION_ROUND = 512


@dataclass(frozen=True, slots=True)
class Draft:
    """What the proposer adds to one rank's budget."""

    method: str
    model: str | None
    num_speculative_tokens: int
    layers: list[LayerCache]
    """The draft's cache layers, numbered after the target's."""
    weights_bytes: int
    activation_peak_bytes: int
    """The draft's forward over the batch plus the target's hidden states held beside it (0 for ngram)."""


def speculative_draft(
    name: str,
    source: PretrainedConfig,
    config: ServeConfig,
    traces: RankTraces,
    target: Target,
    dtype: torch.dtype,
    tokens: int,
    after_layer: int,
) -> Draft | None:
    """The proposer ``--speculative-config`` names, for ``source`` on one rank (None without it); the draft's layers
    are numbered from ``after_layer``. What is not modelled is refused in one line."""
    settings = parse_speculative_config(config.speculative_config)
    if settings is None:
        return None
    method, count = settings.method, settings.num_speculative_tokens
    if config.engine != "vllm":
        raise UnsupportedError("speculative decoding is modelled for vLLM's budget only (SGLang's EAGLE workers are not)")
    if method == "ngram":
        return Draft(method, None, count, [], 0, 0)
    if method != "draft_model":
        raise UnsupportedError(
            f"speculative method {method!r}: its head's config is not bundled (the Hub cannot be reached), so its "
            "weights and KV cache are not modelled; ngram and draft models are"
        )
    numbers = config.vllm_version.strip().removeprefix("v").split(".")
    if (int(numbers[0]), int(numbers[1])) < DRAFT_MODEL_FIRST_RELEASE:
        raise UnsupportedError(
            f'vLLM {config.vllm_version} refuses a draft model on its V1 engine ("Speculative decoding with draft '
            'model is not supported yet"); pass --vllm-version 0.15 or later, or "method": "ngram"'
        )
    if config.pp > 1 or multimodal_kind(source) is not None or getattr(source, "is_encoder_decoder", False):
        raise UnsupportedError(f"{name}: a draft model is modelled for a text decoder without pipeline parallel")
    if settings.draft_tensor_parallel_size not in (None, config.tp):
        raise UnsupportedError(
            f"a draft at tensor parallel {settings.draft_tensor_parallel_size} beside a target at {config.tp} is not "
            "modelled (leave draft_tensor_parallel_size out: the draft runs at the target's)"
        )
    assert settings.model is not None and config.tp is not None and config.max_model_len is not None
    draft = load_config(settings.model)
    vocab, draft_vocab = _vocab(source), _vocab(draft)
    if vocab != draft_vocab:
        raise UnsupportedError(
            f"the draft {settings.model} has a vocabulary of {draft_vocab:,} tokens and {name} {vocab:,}: vLLM needs "
            "one vocabulary for both"
        )
    layers, weights, activation = traces.draft(
        rank_config(draft, config.tp), target, dtype, long_tokens=config.max_model_len, tokens=tokens
    )
    if any(layer.kind != "full" for layer in layers):
        raise UnsupportedError(
            f"the draft {settings.model} caches more than full attention: its KV cache groups are not modelled"
        )
    hidden = getattr(source.get_text_config(), "hidden_size", 0)
    held = _rounded(tokens * hidden * torch.empty((), dtype=dtype).element_size())
    numbered = [dataclasses.replace(layer, layer=after_layer + layer.layer) for layer in layers]
    return Draft(method, settings.model, count, numbered, weights, activation + held)


def _vocab(config: PretrainedConfig) -> int:
    return int(getattr(config.get_text_config(), "vocab_size", 0) or 0)


def _rounded(nbytes: int) -> int:
    return -(-nbytes // _ALLOCATION_ROUND) * _ALLOCATION_ROUND
