"""The result of a serving budget: plain data, no tensors, nothing printed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vramsim.estimators.kv_cache import LayerCache
from vramsim.results.report import Assumption

__all__ = ["ServeEncoder", "ServeLora", "ServePrefix", "ServeReport", "ServeSpeculative", "ServeStage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeStage:
    """One pipeline stage's rank: its decoder layers and the KV cache its own memory would allow."""

    rank: int
    layers: tuple[int, int]
    """Decoder layers ``[first, last)``."""
    weights_bytes: int
    activation_peak_bytes: int
    kv_cache_bytes: int
    kv_blocks: int
    """Blocks this stage's memory holds; vLLM gives every stage the fewest of them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeEncoder:
    """A multimodal model's encoder profile in vLLM's profile run: the dummy batch and what it held."""

    modality: str
    items: int
    width: int
    height: int
    tokens_per_item: int
    crops_per_item: int
    """The tower's inputs of ``width`` x ``height`` per item: Gemma 3's pan-and-scan crops plus the whole image."""
    peak_bytes: int
    """The encoder's run alone: its peak over the weights."""
    cache_bytes: int
    """Its outputs, kept (vLLM's encoder cache) through the decoder's run and the sampler's warm-up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeLora:
    """vLLM's LoRA slots (``--enable-lora``): allocated at start-up for ``max_loras`` adapters of ``max_lora_rank``."""

    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int
    """Adapters kept in host memory: no device memory."""
    embeddings: bool
    """Whether the embedding and the head have slots too."""
    slot_bytes: int
    """The slots and the punica wrapper's index buffers, in the weights (vLLM's "Model loading took")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSpeculative:
    """Speculative decoding (``--speculative-config``): what its proposer holds on the device."""

    method: str
    model: str | None
    """The draft model (None: ngram, which proposes on the host)."""
    num_speculative_tokens: int
    weights_bytes: int
    """The draft's weights on this rank, in the weights (0 for ngram)."""
    activation_peak_bytes: int
    """The draft's dummy run over the batch, the target's hidden states held beside it (0 for ngram)."""
    kv_bytes_per_token: int
    """The draft's layers' KV cache per token, in the KV cache's blocks beside the target's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServePrefix:
    """Prefix caching's effect on concurrency: every request starts with the same ``tokens``."""

    tokens: int
    shared_blocks: int
    """The prefix's full blocks, held once (vLLM caches full blocks only; SGLang's radix tree every token)."""
    request_blocks: int
    """A request's own blocks beyond the shared ones."""
    max_concurrency: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeReport:
    """One tensor-parallel rank's memory under a serving engine, and the KV cache it is left with.

    Every byte figure is per rank (all ranks of a tensor-parallel group hold the same shard sizes).
    """

    model: str
    engine: str
    target: str
    gpus: int
    tp: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_cache_dtype: str
    utilization: float
    """vLLM's ``gpu_memory_utilization`` or SGLang's ``mem_fraction_static``."""
    total_bytes: int
    """The device's ``total_memory``."""
    usable_bytes: int
    """vLLM: total x utilization. SGLang: what its static share leaves for weights and KV cache."""
    weights_bytes: int
    """The rank's weights, as the caching allocator holds them."""
    activation_peak_bytes: int
    """The profile forward's peak over the weights (vLLM's ``torch_peak_increase``; 0 for SGLang)."""
    non_torch_bytes: int
    """NCCL and custom all-reduce buffers (tensor parallel only)."""
    cuda_graph_bytes: int
    """CUDA-graph pool subtracted (0 with ``--enforce-eager`` and for SGLang)."""
    context_bytes: int
    """The CUDA context: outside vLLM's budget; taken off before SGLang's fraction applies."""
    kv_cache_bytes: int
    kv_bytes_per_token: int
    """Bytes one token takes across every attention layer, in the KV cache dtype."""
    block_size: int
    block_bytes: int
    kv_blocks: int
    kv_cache_tokens: int
    request_bytes: int
    """KV cache one request of ``max_model_len`` tokens takes."""
    max_concurrency: float
    """Requests of ``max_model_len`` tokens the KV cache holds at once."""
    layers: list[LayerCache]
    assumptions: list[Assumption] = field(default_factory=list)
    concurrency: int | None = None
    """The inverse question's concurrency, when asked."""
    replicas: int = 1
    """Data-parallel copies of the tensor-parallel group the answer needs."""
    trace_seconds: float = 0.0
    pp: int = 1
    vllm_version: str | None = None
    """The vLLM release whose profile run the budget follows (``--vllm-version``); None for SGLang."""
    stages: list[ServeStage] = field(default_factory=list)
    """With pipeline parallel, every stage; the report's other figures are the stage with the fewest blocks."""
    encoder: ServeEncoder | None = None
    """A multimodal model's encoder profile (None: a text model, or served as text only)."""
    lora: ServeLora | None = None
    """LoRA slots (None without ``--enable-lora``)."""
    speculative: ServeSpeculative | None = None
    """Speculative decoding's proposer (None without ``--speculative-config``)."""
    prefix_caching: bool = True
    """vLLM V1's default; False with ``--no-enable-prefix-caching``."""
    shared_prefix: ServePrefix | None = None
    """The concurrency with a shared prefix (None without ``--shared-prefix-len``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``vramsim serve --json`` prints exactly this."""
        return asdict(self)

    def __repr__(self) -> str:
        return f"<ServeReport kv={self.kv_cache_tokens:,} tokens concurrency={self.max_concurrency:.2f}x target={self.target}>"
