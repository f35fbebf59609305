"""A serving engine's KV cache budget, counted the way vLLM and SGLang count it (no torch here).

vLLM (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``, ``vllm/utils/mem_utils.py``
``memory_profiling``): the engine may use ``total_memory x gpu_memory_utilization``; from that it
takes the weights, the torch peak a profile forward over ``max_num_batched_tokens`` tokens adds
(``torch_peak_increase``), the memory outside torch that grew since the engine started
(``non_torch_increase``: the NCCL communicators and custom all-reduce buffers opened after the engine's first
snapshot), and, from v0.21 on, its CUDA-graph
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
    "NCCL_NVLS_ARCHITECTURES",
    "NCCL_NVLS_BYTES_PER_PEER",
    "NCCL_NVLS_MIN_RANKS",
    "NVLINK_BOARDS",
    "SGLANG_GPU_MEMORY_TIERS",
    "SGLANG_LARGE_GPU",
    "SGLANG_LARGE_GPU_RESERVED_MIB",
    "SGLANG_RESERVED_MIB",
    "VLLM_ATTENTION_BLOCK_ALIGNMENT",
    "VLLM_BLOCK_SIZE",
    "VLLM_CUDA_GRAPH_FIRST_CAPTURE_COPIES",
    "VLLM_CUDA_GRAPH_PER_GRAPH_BYTES",
    "VLLM_CUSTOM_ALLREDUCE_BYTES",
    "VLLM_CUSTOM_ALLREDUCE_MAX_BYTES",
    "VLLM_CUSTOM_ALLREDUCE_WORLD_SIZES",
    "VLLM_GPU_MEMORY_UTILIZATION",
    "VLLM_LORA_CAPTURE_CASES",
    "VLLM_TP_COMMUNICATORS_AT_INIT",
    "VLLM_TP_COMMUNICATORS_IN_PROFILE",
    "VLLM_VOCAB_PADDING",
    "Budget",
    "BudgetInputs",
    "CaptureRule",
    "CudaGraphEstimate",
    "HybridGroups",
    "MambaAlignment",
    "hybrid_groups",
    "mamba_alignment",
    "request_bytes",
    "sglang_budget",
    "sglang_mem_fraction",
    "shared_prefix_blocks",
    "token_bytes",
    "vllm_budget",
    "vllm_capture_sizes",
    "vllm_cuda_graphs",
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

VLLM_CUSTOM_ALLREDUCE_MAX_BYTES = 8 * _MiB
"""vLLM's custom all-reduce ``max_size`` (``8192 * 1024`` in ``CustomAllreduce.__init__``,
``vllm/distributed/device_communicators/custom_all_reduce.py``)."""

VLLM_CUSTOM_ALLREDUCE_BYTES = 2 * VLLM_CUSTOM_ALLREDUCE_MAX_BYTES
"""Per rank, outside torch: the custom all-reduce's two ``cudaMalloc``'d IPC buffers, ``meta_ptrs`` (the signal's
``meta_size()``, a few KiB, plus a ``max_size`` scratch buffer) and ``buffer_ptrs`` (``max_size``); its ``rank_data``
(8 MiB) is a torch tensor. vLLM builds it only for 2, 4, 6 or 8 ranks (``_SUPPORTED_WORLD_SIZES``), and beyond two
only when every GPU reaches every other over NVLink ("Custom allreduce is disabled because it's not supported on more
than two PCIe-only GPUs")."""

VLLM_CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)
"""``CustomAllreduce._SUPPORTED_WORLD_SIZES`` (16 in later releases, past the 8 GPUs of one node here)."""

VLLM_TP_COMMUNICATORS_AT_INIT = 1
"""NCCL communicators a tensor-parallel rank opens for its group while the distributed environment starts: vLLM's
``PyNcclCommunicator`` (``vllm/distributed/device_communicators/pynccl.py``: ``ncclCommInitRank`` and a one-element
warm-up ``all_reduce``), which ``CudaCommunicator.__init__`` builds for every group of more than one rank but the
expert-parallel one, with the custom all-reduce beside it on the tensor-parallel group. Counted in the profile's
non-torch increase only where vLLM's first snapshot predates them (before 0.11, ``VllmRelease``)."""

VLLM_TP_COMMUNICATORS_IN_PROFILE = 1
"""NCCL communicators a tensor-parallel rank opens during the profile run, after every vLLM release's snapshot:
PyTorch's ``ProcessGroupNCCL`` communicator of the group's ``device_group``, which PyTorch creates at the group's
first collective (ProcessGroupNCCL's lazy default for a group bound to no device; that no vLLM release binds one
at ``init_process_group`` was not checked in every release). That collective is the logits' all-gather in the
sampler warm-up: V1's ``LogitsProcessor._gather_logits`` all-gathers (``Platform.use_all_gather`` is true under V1),
and ``DeviceCommunicatorBase.all_gather`` calls ``dist.all_gather_into_tensor`` on the device group
(``CudaCommunicator`` sends all-reduce, reduce-scatter, all-gatherv, send and recv through pynccl, not all-gather).
The pipeline group opens none in the profile: its first send comes with the first scheduled batch."""

NVLINK_BOARDS = ("a100-40gb", "a100-80gb", "h20", "h100-sxm", "h200", "b200", "gb200")
"""GPUs sold on NVSwitch boards (HGX), every GPU linked to every other over NVLink: vLLM's custom all-reduce runs
beyond two of them, and from Hopper on NCCL adds NVLink SHARP (NVLS) buffers. PCIe and NVL-bridge parts are left out."""

NCCL_NVLS_BYTES_PER_PEER = 24 * 2 * (4 * _MiB + 2 * _MiB)
"""301,989,888 B of NCCL NVLS buffers per rank of the communicator, each rank holding one set per rank
(``nvlsTotalSize = nvlsPerRankSize x nHeads``): NCCL's own log line "NVLS comm ... headRank 3 nHeads 8 buffSize
4194304 memSize 2097152 nvlsPerRankSize 301989888 nvlsTotalSize 2415919104" on 8 x H200 (vllm#9699), 24 channels x 2
x (buffSize + memSize). NCCL enables NVLS on Hopper+ NVSwitch boards for more than two GPUs (vllm#9699: "NVLS is only
enabled for n > 2 GPUs"); it connects on the first collective that picks it (NCCL's runtime connection), the
profile run's large all-reduces, so vLLM's profile counts it."""

NCCL_NVLS_MIN_RANKS = 3
"""The fewest ranks NCCL enables NVLS for (vllm#9699)."""

NCCL_NVLS_ARCHITECTURES = ("hopper", "blackwell")
"""Architectures with NVLink SHARP in their NVSwitch (NVLS: NVSwitch 3, Hopper on)."""


VLLM_CUDA_GRAPH_PER_GRAPH_BYTES = 1 * _MiB
"""Each CUDA graph after a mode's first: vLLM's own floor for a graph's driver memory (an assumption).

``profile_cudagraph_memory`` (``vllm/v1/worker/gpu_model_runner.py``) captures a mode's two largest sizes and
charges every further graph what the second cost, at least 1 MiB ("Use at least 1 MiB per graph for driver
overhead"): the second capture reuses the first one's pool, so what it adds is the driver's memory for the
instantiated graph (its kernels' parameters), which no trace holds. Published estimates run higher (vLLM's
"Estimated CUDA graph memory: 0.52 GiB total" for Qwen3-8B with 51 + 35 graphs, LMCache#3430), so this is a floor.
"""

VLLM_CUDA_GRAPH_FIRST_CAPTURE_COPIES = 2
"""Copies of the largest capture's activations vLLM's estimate sees in a mode's first capture: its warm-up
``_dummy_run`` (``cudagraph_num_of_warmups = 1``) allocates them in the default pool, which keeps them cached,
then the capture allocates them again in the graphs' private pool, and ``profile_cudagraph_memory`` measures both
as one drop in free memory (``mem_before - free_after`` around ``_warmup_and_capture``, after one
``empty_cache``)."""

VLLM_LORA_CAPTURE_CASES = 2
"""Graphs vLLM captures per size and mode with ``--enable-lora``, by default: one with no adapter active and one with
every slot active. ``CudagraphDispatcher._get_lora_cases`` (``vllm/v1/cudagraph_dispatcher.py``, 0.21) returns
``[0] + get_captured_lora_counts(max_loras, specialize_active_lora)`` under ``cudagraph_specialize_lora`` (on by
default, ``vllm/config/compilation.py``), and ``get_captured_lora_counts`` (``vllm/lora/utils.py``) is
``[max_loras + 1]`` while ``specialize_active_lora`` is off (its default); both cases are keys of every PIECEWISE and
FULL size, so ``profile_cudagraph_memory`` counts twice the graphs. 0.12.0's dispatcher has the same two cases
(``lora_cases = [True, False]``), 0.11.0 has no ``cudagraph_specialize_lora``; the estimate enters the budget from
0.21 only. ``specialize_active_lora`` (a graph per power of two of active adapters) and
``cudagraph_specialize_lora=False`` (one case) are not modelled."""

CaptureRule = Literal["step8", "step16"]


def vllm_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, rule: CaptureRule, decode_query_len: int = 1) -> list[int]:
    """The token counts vLLM captures CUDA graphs for (``VllmConfig._set_cudagraph_sizes``, ``vllm/config/vllm.py``):
    up to ``min(2 x max_num_seqs x decode_query_len, 512, max_num_batched_tokens)`` (``max_cudagraph_capture_size``),
    1, 2, 4, then every 8; from 0.11 (``step16``) every 8 below 256 and every 16 from 256 on. With speculative
    decoding (``decode_query_len`` = ``num_speculative_tokens + 1``) and FULL decode graphs,
    ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`` (``vllm/config/compilation.py``, 0.21) rounds every
    size up to a multiple of ``decode_query_len`` and drops those over the largest size and the duplicates."""
    largest = min(2 * max_num_seqs * decode_query_len, 512, max_num_batched_tokens)
    sizes = [size for size in (1, 2, 4) if size <= largest]
    if rule == "step16":
        sizes += list(range(8, min(largest + 1, 256), 8)) + list(range(256, largest + 1, 16))
    else:
        sizes += list(range(8, largest + 1, 8))
    if decode_query_len == 1:
        return sizes
    bound = sizes[-1]  # ``max_cudagraph_capture_size`` as ``_set_cudagraph_sizes`` leaves it: the largest size
    rounded = sorted({-(-size // decode_query_len) * decode_query_len for size in sizes})
    return [size for size in rounded if size <= bound] or ([decode_query_len] if decode_query_len <= bound else [])


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaGraphEstimate:
    """vLLM's CUDA graph memory estimate (``profile_cudagraph_memory``) for one rank."""

    mixed_sizes: tuple[int, ...]
    """PIECEWISE graphs' token counts (mixed prefill-decode batches)."""
    decode_sizes: tuple[int, ...]
    """FULL graphs' (uniform decode batches: one token per request, at most ``max_num_seqs``)."""
    activation_bytes: int
    """The traced activation peak of one forward over the largest size (no logits: they are not in the graph)."""
    captures_per_size: int = 1
    """Graphs per size and mode: 1, or ``VLLM_LORA_CAPTURE_CASES`` with LoRA (with and without adapters active)."""

    @property
    def first_capture_bytes(self) -> int:
        return VLLM_CUDA_GRAPH_FIRST_CAPTURE_COPIES * self.activation_bytes

    @property
    def graphs(self) -> int:
        return (len(self.mixed_sizes) + len(self.decode_sizes)) * self.captures_per_size

    @property
    def total_bytes(self) -> int:
        """The largest mode's first capture plus every other graph at the per-graph cost, as vLLM sums it (FULL and
        PIECEWISE share one pool, so only the larger first capture counts). With LoRA a mode's two largest captures
        are its largest size with every adapter active, then without (the keys are sorted by tokens, then active
        adapters, descending), so the first capture is the LoRA one and the second, the per-graph sample, reuses
        its pool."""
        others = sum(max(len(sizes) * self.captures_per_size - 1, 0) for sizes in (self.mixed_sizes, self.decode_sizes))
        return self.first_capture_bytes + others * VLLM_CUDA_GRAPH_PER_GRAPH_BYTES


def vllm_cuda_graphs(
    max_num_seqs: int,
    max_num_batched_tokens: int,
    rule: CaptureRule,
    activation_bytes: int,
    *,
    lora: bool = False,
    decode_query_len: int = 1,
) -> CudaGraphEstimate:
    """The graphs vLLM captures by default (``cudagraph_mode`` ``FULL_AND_PIECEWISE``: every size PIECEWISE, the
    sizes of ``decode_query_len`` tokens per request up to ``max_num_seqs`` requests also FULL for decode,
    ``CudagraphDispatcher.initialize_cudagraph_keys``), each size twice with ``lora`` (``VLLM_LORA_CAPTURE_CASES``),
    and the memory its estimate charges for them."""
    sizes = vllm_capture_sizes(max_num_seqs, max_num_batched_tokens, rule, decode_query_len)
    decode = range(decode_query_len, decode_query_len * max_num_seqs + 1)
    return CudaGraphEstimate(
        mixed_sizes=tuple(sizes),
        decode_sizes=tuple(size for size in sizes if size in decode),
        activation_bytes=activation_bytes,
        captures_per_size=VLLM_LORA_CAPTURE_CASES if lora else 1,
    )


SGLANG_GPU_MEMORY_TIERS = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 2048, 24, 80),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
)
"""SGLang's defaults by GPU memory (MiB): (below, ``chunked_prefill_size``, ``cuda_graph_max_bs`` under tp 4, at
tp 4 or more); larger GPUs (B200, MI300) take 16,384 and 512. Source: ``python/sglang/srt/server_args.py``
``ServerArgs._handle_gpu_memory_settings`` (CUDA tiers: T4/4080, A10/4090/5090, A100-40GB/L40, H100/A100-80GB,
H20/H200)."""

SGLANG_LARGE_GPU = (16384, 512)
"""``chunked_prefill_size`` and ``cuda_graph_max_bs`` above the last tier."""

SGLANG_RESERVED_MIB = 512
"""SGLang's "constant meta data (e.g., from attention backend)" reserve, in MiB (``_handle_gpu_memory_settings``)."""

SGLANG_LARGE_GPU_RESERVED_MIB = 10 * 1024
"""SGLang's least reserve on GPUs over 60 GiB (``reserved_mem = max(reserved_mem, 10 * 1024)``)."""


def sglang_mem_fraction(tp: int, memory_bytes: int, pp: int = 1) -> float:
    """SGLang's default ``mem_fraction_static``: the GPU's memory less a reserve for activations (1.5 MiB per token of
    ``max(chunked_prefill_size, 2048)``), CUDA graphs (2 MiB per ``cuda_graph_max_bs``) and parallelism
    (``tp x pp / 8`` GiB), over the memory, rounded to 3 places (``_handle_gpu_memory_settings``). SGLang reads the
    memory from ``nvidia-smi`` in MiB; here it is the device's ``total_memory``, a few hundred MiB less."""
    gpu_mem = memory_bytes / _MiB
    tier = next((t for t in SGLANG_GPU_MEMORY_TIERS if gpu_mem < t[0]), None)
    chunked, graph_bs = SGLANG_LARGE_GPU if tier is None else (tier[1], tier[2] if tp < 4 else tier[3])
    reserved = SGLANG_RESERVED_MIB + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, SGLANG_LARGE_GPU_RESERVED_MIB)
    return round((gpu_mem - reserved) / gpu_mem, 3)


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


def shared_prefix_blocks(prefix_len: int, max_model_len: int, block_size: int, kv_blocks: int) -> tuple[int, int, float]:
    """Requests of ``max_model_len`` tokens that all start with the same ``prefix_len`` tokens, with prefix caching:
    ``(shared blocks, each request's own blocks, concurrency)``. vLLM caches full blocks only (``hash_block_tokens``
    over each full block), so the prefix's ``prefix_len // block_size`` full blocks are held once, and each request
    holds the rest of its ``cdiv(max_model_len, block_size)`` blocks; SGLang's radix tree (``block_size`` 1) shares
    every token. A closed form over full-attention layers (every layer keeps every token)."""
    shared = prefix_len // block_size
    own = math.ceil(max_model_len / block_size) - shared
    return shared, own, max(kv_blocks - shared, 0) / own


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
