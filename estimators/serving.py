"""A serving engine's KV cache budget, counted the way vLLM and SGLang count it (no torch here).

vLLM (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``, ``vllm/utils/mem_utils.py``
``memory_profiling``): the engine may use ``total_memory x gpu_memory_utilization``; from that it
takes the weights, the torch peak a profile forward over ``max_num_batched_tokens`` tokens adds
(``torch_peak_increase``), the memory outside torch that grew since the engine started
(``non_torch_increase``: NCCL and custom all-reduce buffers), and, from v0.19 on, its CUDA-graph
estimate; the rest is KV cache, cut into blocks of ``block_size`` tokens in every attention layer
(``vllm/v1/core/kv_cache_utils.py``). The CUDA context already exists when the engine takes its
first snapshot, so it is not subtracted: it has to fit in the share ``gpu_memory_utilization``
leaves out.

SGLang (``python/sglang/srt/model_executor/model_runner.py`` ``profile_max_num_token``): the
memory free after the weights load, less ``(1 - mem_fraction_static)`` of the memory that was free
when the engine started (total less the CUDA context), divided by the bytes one token takes in
every layer (``cell_size``): a token pool with no blocks, and no profile forward subtracted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .kv_cache import LayerCache

__all__ = [
    "KV_CACHE_DTYPE_BYTES",
    "SGLANG_MEM_FRACTION_STATIC",
    "VLLM_ATTENTION_BLOCK_ALIGNMENT",
    "VLLM_BLOCK_SIZE",
    "VLLM_CUDA_GRAPH_BYTES",
    "VLLM_CUSTOM_ALLREDUCE_BYTES",
    "VLLM_GPU_MEMORY_UTILIZATION",
    "VLLM_VOCAB_PADDING",
    "Budget",
    "BudgetInputs",
    "HybridGroups",
    "MambaAlignment",
    "hybrid_groups",
    "mamba_alignment",
    "request_bytes",
    "sglang_budget",
    "sglang_mem_fraction",
    "token_bytes",
    "vllm_budget",
    "vllm_scheduler_defaults",
]

Engine = Literal["vllm", "sglang"]

_MiB = 1 << 20
_GiB = 1 << 30

KV_CACHE_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}
"""Bytes per cached element for ``--kv-cache-dtype``: vLLM's ``fp8``/``fp8_e4m3``/``fp8_e5m2``
(``vllm/config/cache.py`` ``CacheDType``); ``int8`` as engines with int8 KV caches store it (vLLM has none)."""

VLLM_BLOCK_SIZE = 16
"""Tokens per KV cache block: vLLM's default ``block_size`` on CUDA (``vllm/config/cache.py``)."""

VLLM_ATTENTION_BLOCK_ALIGNMENT = 16
"""Tokens an attention block size must be a multiple of when vLLM sizes it for a hybrid attention +
Mamba model (``HybridAttentionMambaModelConfig.verify_and_update_config`` in
``vllm/model_executor/models/config.py``: "some attention backends (e.g. FA) only support setting
block size to multiple of 16"; later versions call it ``kernel_block_alignment_size``, 16 for
non-MLA attention)."""

VLLM_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default ``gpu_memory_utilization`` (``vllm/config/cache.py``)."""

VLLM_VOCAB_PADDING = 64
"""vLLM pads the vocabulary of its embedding and LM head to a multiple of 64 before splitting it
over tensor-parallel ranks (``DEFAULT_VOCAB_PADDING_SIZE``, ``vocab_parallel_embedding.py``)."""

VLLM_CUSTOM_ALLREDUCE_BYTES = 8 * _MiB
"""Per rank with tensor parallel: vLLM's custom all-reduce buffer (``max_size=8192 * 1024`` in
``vllm/distributed/device_communicators/custom_all_reduce.py``), allocated with cudaMalloc outside torch."""

VLLM_CUDA_GRAPH_BYTES = int(0.21 * _GiB)
"""CUDA-graph pool subtracted from the KV budget unless ``--enforce-eager`` (an assumption).

The one public figure found: "Graph capturing finished in 14 secs, took 0.21 GiB" for
``vllm serve meta-llama/Llama-3.2-1B-Instruct`` (vllm-project/vllm#11349). It grows with the
model and the capture sizes. vLLM subtracts its own estimate from the KV budget when
``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, announced as the default from v0.19
(``gpu_worker.py`` ``determine_available_memory``); earlier versions capture the graphs after
the KV cache is allocated, in the share ``gpu_memory_utilization`` leaves out.
"""

SGLANG_MEM_FRACTION_STATIC = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
"""SGLang's default ``mem_fraction_static`` by tensor-parallel size, largest first: (tp at least, fraction).
Source: ``python/sglang/srt/server_args.py`` ``__post_init__`` (v0.4); later versions also weigh
the GPU's memory and the chunked-prefill size."""


def sglang_mem_fraction(tp: int) -> float:
    """SGLang's default ``mem_fraction_static`` for ``tp`` ranks."""
    return next(fraction for at_least, fraction in SGLANG_MEM_FRACTION_STATIC if tp >= at_least)


def vllm_scheduler_defaults(memory_bytes: int, device_label: str) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` ``vllm serve`` picks for a GPU.

    Source: ``vllm/engine/arg_utils.py`` ``_set_default_args`` (V1, OpenAI server): 8192 tokens
    and 1024 sequences on GPUs with at least 70 GiB that are not A100s, else 2048 and 256.
    """
    large = memory_bytes >= 70 * _GiB and "a100" not in device_label.lower()
    return (8192, 1024) if large else (2048, 256)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetInputs:
    """What one rank brings to the budget, every figure from the traced program or a named assumption."""

    total_bytes: int
    """The device's ``total_memory``."""
    utilization: float
    """vLLM's ``gpu_memory_utilization`` or SGLang's ``mem_fraction_static``."""
    weights_bytes: int
    activation_peak_bytes: int
    """Torch peak a profile forward adds over the weights (vLLM's ``torch_peak_increase``)."""
    non_torch_bytes: int
    """Memory outside torch the engine adds after its first snapshot (NCCL, custom all-reduce)."""
    cuda_graph_bytes: int
    """CUDA-graph memory subtracted from the KV budget (0 with ``--enforce-eager``)."""
    context_bytes: int
    """The CUDA context: there before the engine's first snapshot (SGLang sees it as used memory)."""
    layers: list[LayerCache]
    kv_element_bytes: int | None
    """Bytes per cached element with ``--kv-cache-dtype`` (None: the model's dtype)."""
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """The KV cache one rank gets, and the terms it comes from."""

    usable_bytes: int
    """What the engine may use: total x utilization (vLLM), or SGLang's static share."""
    kv_cache_bytes: int
    """What is left for the KV cache."""
    block_size: int
    """Tokens per block (vLLM raises it for hybrid Mamba models; SGLang: 1)."""
    block_bytes: int
    """One block: ``block_size`` tokens in every attention layer (SGLang: one token)."""
    kv_blocks: int
    kv_cache_tokens: int
    request_bytes: int
    """KV cache one request of ``max_model_len`` tokens takes, in whole blocks."""
    max_concurrency: float
    """Requests of ``max_model_len`` tokens the KV cache holds at once."""


def token_bytes(layers: list[LayerCache], element_bytes: int | None) -> int:
    """Bytes one token takes across every layer that caches tokens (state layers excluded)."""
    return sum(layer.bytes_per_token_as(element_bytes) for layer in layers if layer.kind not in ("state", "cross"))


def request_bytes(
    layers: list[LayerCache], tokens: int, *, element_bytes: int | None, block_size: int, max_num_batched_tokens: int
) -> int:
    """KV cache one request of ``tokens`` tokens takes, in whole blocks per layer.

    A sliding layer needs the tokens it keeps (its window less the new token: ``window - 1``
    with the config's window) plus what one scheduler step may add, as vLLM's
    ``SlidingWindowSpec.max_memory_usage_bytes`` counts it: ``cdiv(min(window - 1 +
    max_num_batched_tokens, tokens), block_size) + 1`` blocks. A state layer holds its state once;
    a cross-attention layer the encoder's tokens it measured (``CrossAttentionSpec``: the encoder
    length, ``max_num_encoder_input_tokens``, 1500 for Whisper), whatever ``tokens`` is.
    """
    total = 0
    for layer in layers:
        per_token = layer.bytes_per_token_as(element_bytes)
        if layer.kind == "state":
            total += layer.state_bytes
        elif layer.kind == "cross":
            total += math.ceil(layer.encoder_tokens / block_size) * block_size * per_token
        elif layer.kind == "sliding" and layer.window is not None:
            kept = min(layer.window + max_num_batched_tokens, tokens)
            blocks = min(math.ceil(kept / block_size) + 1, math.ceil(tokens / block_size))
            total += blocks * block_size * per_token
        else:
            total += math.ceil(tokens / block_size) * block_size * per_token
    return total


def pp_partition(num_layers: int, pp: int) -> list[tuple[int, int]]:
    """Each pipeline stage's decoder layers ``[first, last)``, as vLLM's ``get_pp_indices``
    (``vllm/distributed/utils.py``, no ``VLLM_PP_LAYER_PARTITION``) splits them: ``num_layers // pp``
    per stage, the remainder one each to the stages before the last, from the second-to-last back
    (the last stage holds the final norm and the head)."""
    if num_layers < pp:
        raise ValueError(f"pipeline parallel {pp} needs at least {pp} decoder layers; the model has {num_layers}")
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    bounds: list[tuple[int, int]] = []
    for count in counts:
        first = bounds[-1][1] if bounds else 0
        bounds.append((first, first + count))
    return bounds


def vllm_budget(inputs: BudgetInputs) -> Budget:
    """vLLM's ``determine_available_memory`` and block count for one rank."""
    usable = int(inputs.total_bytes * inputs.utilization)
    kv_bytes = usable - inputs.weights_bytes - inputs.activation_peak_bytes - inputs.non_torch_bytes - inputs.cuda_graph_bytes
    groups = hybrid_groups(inputs.layers, inputs.kv_element_bytes, inputs.block_size)
    if groups is not None:
        return _hybrid_budget(inputs, usable, kv_bytes, groups)
    block = inputs.block_size * token_bytes(inputs.layers, inputs.kv_element_bytes)
    blocks = max(kv_bytes, 0) // block if block else 0
    per_request = request_bytes(
        inputs.layers,
        inputs.max_model_len,
        element_bytes=inputs.kv_element_bytes,
        block_size=inputs.block_size,
        max_num_batched_tokens=inputs.max_num_batched_tokens,
    )
    concurrency = blocks * block / per_request if per_request else 0.0
    return Budget(
        usable_bytes=usable,
        kv_cache_bytes=kv_bytes,
        block_size=inputs.block_size,
        block_bytes=block,
        kv_blocks=blocks,
        kv_cache_tokens=blocks * inputs.block_size,
        request_bytes=per_request,
        max_concurrency=concurrency,
    )


def sglang_budget(inputs: BudgetInputs) -> Budget:
    """SGLang's ``profile_max_num_token``: free memory after the weights, less the share
    ``mem_fraction_static`` keeps out, over the bytes of one token in every layer (page size 1)."""
    at_start = inputs.total_bytes - inputs.context_bytes  # SGLang's total_gpu_memory: free memory at start
    free_after_weights = at_start - inputs.weights_bytes
    reserved = int(at_start * (1 - inputs.utilization))
    kv_bytes = free_after_weights - reserved
    cell = token_bytes(inputs.layers, inputs.kv_element_bytes)
    tokens = max(kv_bytes, 0) // cell if cell else 0
    per_request = request_bytes(
        inputs.layers,
        inputs.max_model_len,
        element_bytes=inputs.kv_element_bytes,
        block_size=1,
        max_num_batched_tokens=inputs.max_num_batched_tokens,
    )
    return Budget(
        usable_bytes=free_after_weights - reserved + inputs.weights_bytes,
        kv_cache_bytes=kv_bytes,
        block_size=1,
        block_bytes=cell,
        kv_blocks=tokens,
        kv_cache_tokens=tokens,
        request_bytes=per_request,
        max_concurrency=tokens * cell / per_request if per_request else 0.0,
    )


@dataclass(frozen=True, slots=True)
class MambaAlignment:
    """vLLM's page-size unification for a hybrid attention + Mamba model
    (``HybridAttentionMambaModelConfig.verify_and_update_config``, ``vllm/model_executor/models/config.py``):
    the attention block size becomes the smallest multiple of 16 tokens whose page (one attention
    layer's keys and values for ``block_size`` tokens) holds one Mamba layer's state, and the Mamba
    page (``MambaSpec.page_size_bytes``: the state's bytes, ``vllm/v1/kv_cache_interface.py``) is
    padded up to that page (``mamba_page_size_padded``). Prefix caching is off for these models, so
    no Mamba-kernel chunk alignment applies."""

    block_size: int
    """``16 x cdiv(mamba_page, 16 x attention bytes per token)``."""
    page_bytes: int
    """One attention page: ``block_size`` tokens of one attention layer; the padded Mamba page."""
    mamba_page_bytes: int
    """One Mamba layer's state per request, unpadded (conv state of ``conv_kernel - 1`` columns plus the SSM state)."""

    @property
    def padding_percent(self) -> float:
        """What vLLM logs: "Padding mamba page size by X% to ensure that mamba page size and attention
        page size are exactly equal"."""
        return 100 * (self.page_bytes - self.mamba_page_bytes) / self.mamba_page_bytes


def mamba_alignment(layers: list[LayerCache], element_bytes: int | None) -> MambaAlignment | None:
    """The block size and pages of a model with both state and attention layers; ``None`` otherwise.
    Every attention layer must take the same bytes per token and every state layer the same state (one
    ``FullAttentionSpec`` page and one ``MambaSpec`` shape per model, as vLLM computes them)."""
    attention_layers = [layer for layer in layers if layer.kind in ("full", "sliding")]
    if not attention_layers or not any(layer.kind == "state" for layer in layers):
        return None
    model_element = attention_layers[0].element_bytes  # the model dtype: what a cache dtype of "auto" stores
    states = {layer.engine_state_bytes(model_element) for layer in layers if layer.kind == "state"}
    attention = {layer.bytes_per_token_as(element_bytes) for layer in attention_layers}
    if len(states) > 1 or len(attention) > 1 or any(layer.kind in ("latent", "cross") for layer in layers):
        raise ValueError(
            f"a hybrid model with state pages {sorted(states)} and attention pages per token {sorted(attention)}: "
            "vLLM unifies one Mamba state with one attention page per token"
        )
    (mamba,), (per_token,) = states, attention
    step = VLLM_ATTENTION_BLOCK_ALIGNMENT
    block = step * math.ceil(mamba / (step * per_token))
    return MambaAlignment(block_size=block, page_bytes=block * per_token, mamba_page_bytes=mamba)


@dataclass(frozen=True, slots=True)
class HybridGroups:
    """vLLM's KV cache groups for a model whose layers have specs of one page size and more than one
    type (``vllm/v1/core/kv_cache_utils.py`` ``_get_kv_cache_groups_uniform_page_size``): full and
    sliding-window attention (Gemma-2), attention and Mamba state (Jamba, Bamba, once pages are
    unified: ``MambaAlignment``), self- and cross-attention (Whisper: ``CrossAttentionSpec``). The
    layers of each type are split into groups of ``group_size`` layers (the fewest layers of any
    type, or the most where that is under 1.5 times the fewest), the last group of a type padded
    with empty layers; every group draws blocks of one page from one pool, and ``group_size``
    tensors hold the pool."""

    group_size: int
    groups: list[LayerCache]
    """One layer standing for each group's spec, a group per entry."""
    padding_layers: int
    block_size: int
    """Tokens per attention block (``MambaAlignment.block_size`` for a Mamba hybrid)."""
    page_bytes: int
    """One page: ``block_size`` tokens of one attention layer (the padded Mamba state)."""
    mamba: MambaAlignment | None = None


def hybrid_groups(layers: list[LayerCache], element_bytes: int | None, block_size: int = VLLM_BLOCK_SIZE) -> HybridGroups | None:
    """The groups of a model whose cached layers are of more than one type with one page size;
    ``None`` for a model with one attention type (one group, every layer in it) or with latent
    caches or pages that differ."""
    if any(layer.kind == "latent" for layer in layers):
        return None
    mamba = mamba_alignment(layers, element_bytes)
    attention = [layer for layer in layers if layer.kind != "state"]
    if len({layer.bytes_per_token_as(element_bytes) for layer in attention}) > 1:
        return None
    by_spec: dict[tuple[str, int | None], list[LayerCache]] = {}
    for layer in layers:
        by_spec.setdefault((layer.kind, layer.window), []).append(layer)
    if len(by_spec) < 2:
        return None
    if mamba is None and "state" in {kind for kind, _ in by_spec}:
        return None
    fewest, most = min(map(len, by_spec.values())), max(map(len, by_spec.values()))
    group_size = most if most < fewest * 1.5 else fewest
    groups = [same[0] for same in by_spec.values() for _ in range(math.ceil(len(same) / group_size))]
    padding = len(groups) * group_size - len(layers)
    block = mamba.block_size if mamba else block_size
    page = mamba.page_bytes if mamba else block * attention[0].bytes_per_token_as(element_bytes)
    return HybridGroups(
        group_size=group_size, groups=groups, padding_layers=padding, block_size=block, page_bytes=page, mamba=mamba
    )


def _hybrid_budget(inputs: BudgetInputs, usable: int, kv_bytes: int, hybrid: HybridGroups) -> Budget:
    """vLLM's hybrid block count (``get_kv_cache_config_from_groups``: available // page // group_size),
    the tokens its log prints (``_report_kv_cache_config``: blocks // groups x the smallest block
    size, the attention one) and its concurrency (``get_max_concurrency_for_kv_cache_config``:
    blocks over the sum of each group's pages for one request; a Mamba group's is one page,
    ``MambaSpec.max_memory_usage_bytes`` with no speculative blocks)."""
    page, block = hybrid.page_bytes, hybrid.block_size
    blocks = max(kv_bytes, 0) // page // hybrid.group_size
    per_request = sum(
        1
        if layer.kind == "state"
        else request_bytes(
            [layer],
            inputs.max_model_len,
            element_bytes=inputs.kv_element_bytes,
            block_size=block,
            max_num_batched_tokens=inputs.max_num_batched_tokens,
        )
        // page
        for layer in hybrid.groups
    )
    return Budget(
        usable_bytes=usable,
        kv_cache_bytes=kv_bytes,
        block_size=block,
        block_bytes=page * hybrid.group_size,
        kv_blocks=blocks,
        kv_cache_tokens=blocks // len(hybrid.groups) * block,
        request_bytes=per_request * page * hybrid.group_size,
        max_concurrency=blocks / per_request if per_request else 0.0,
    )
