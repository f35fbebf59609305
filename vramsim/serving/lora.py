"""LoRA adapters in vLLM's serving budget (``--enable-lora``): the weight slots it allocates at start-up, the punica
wrapper's index buffers, and the LoRA kernels' buffers in the profile run.

vLLM's ``LoRAModelManager`` (``vllm/lora/model_manager.py``), built as the model loads, wraps every linear layer
(``get_supported_lora_modules``: each ``LinearBase``) and the embedding modules the model's class names
(``embedding_modules``: Llama's ``embed_tokens`` and ``lm_head``), and each wrapper allocates ``max_loras`` slots of
``max_lora_rank`` at once, zeroed, in the model's dtype (``lora_dtype`` auto), whatever adapters are loaded later:

- a linear layer (``BaseLinearLayerWithLoRA.create_lora_weights``, ``vllm/lora/layers/``), per packed slice:
  ``lora_a`` (max_loras, 1, rank, input size) and ``lora_b`` (max_loras, 1, output size, rank), at the rank's
  shard: a column-parallel layer's output and a row-parallel layer's input are divided, the other side is whole;
- the input embedding (``VocabParallelEmbeddingWithLoRA``): ``lora_a`` (max_loras, vocabulary, rank) and ``lora_b``
  (max_loras, 1, hidden, rank), the whole vocabulary on every rank;
- the head (``LogitsProcessorWithLoRA``): ``lora_a`` (max_loras, 1, rank, hidden) and ``lora_b`` (max_loras, 1,
  vocabulary, rank); vLLM refuses a vocabulary over 258,048 there.

The punica wrapper (``PunicaWrapperGPU``, ``vllm/lora/punica_wrapper/``) holds int64 index tensors of
``max_num_batched_tokens`` (token, sampler, padded sampler: one each; embeddings: two rows) and two
``LoRAKernelMeta`` of int32 tensors (two of the tokens, ``max_loras + 1`` twice, ``max_loras + 2``). The profile run
activates ``max_loras`` dummy adapters (``maybe_dummy_run_with_lora``), copied from host memory into the slots, so it
runs the LoRA kernels: each wrapped linear layer allocates a float32 buffer of (slices, tokens, ``max_lora_rank``)
for the shrink and adds the expand into its output in place (``add_lora_linear``), the embedding looks up a (tokens,
rank) slice of its ``lora_a`` and the head a float32 (rows, rank) buffer (``add_lora_logits``). The trace does the
same with forward hooks (``lora_hooks``); the slots and index buffers are counted with the weights, as vLLM's
"Model loading took" counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PretrainedConfig
from transformers.pytorch_utils import Conv1D

from vramsim.config.serving import DEFAULT_LORA_RANK, DEFAULT_MAX_LORAS, ServeConfig
from vramsim.errors import UnsupportedError
from vramsim.serving.versions import vllm_release

__all__ = [
    "LORA_EMBEDDING_MODEL_TYPES",
    "LORA_MAX_VOCAB",
    "LoraSettings",
    "lora_hooks",
    "lora_settings",
    "lora_slot_bytes",
    "punica_bytes",
]

LORA_EMBEDDING_MODEL_TYPES = ("llama",)
"""Model types whose vLLM class names ``embed_tokens`` and ``lm_head`` in ``embedding_modules`` (read from
``LlamaForCausalLM`` in ``vllm/model_executor/models/llama.py``); other families are taken to wrap their linear
layers only (an assumption: their classes were not read)."""

LORA_MAX_VOCAB = 258048
"""``LogitsProcessorWithLoRA.create_lora_weights``: "When using LoRA, vocab size must be <= 258048"."""

LORA_FIRST_RELEASE = (0, 12)
"""The first release without ``lora_extra_vocab_size`` (vllm#28382 and #28545, November 2025: each adapter's 256
extra vocabulary rows and the head's padding to 256 were removed; the release is taken as 0.12, not read from a
tagged release). Before it the slots and the base embeddings carry those rows, which are not modelled."""

_ALLOCATION_ROUND = 512
"""The CUDA caching allocator rounds every block up to 512 B (``kMinBlockSize``)."""


@dataclass(frozen=True, slots=True)
class LoraSettings:
    """``--enable-lora``'s sizes as vLLM fills them in: the GPU slots, their rank, the host cache."""

    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int
    embeddings: bool
    """Whether the model's vLLM class wraps ``embed_tokens`` and ``lm_head`` too (``LORA_EMBEDDING_MODEL_TYPES``)."""

    def key(self) -> tuple[int, int, bool]:
        """What shapes the traced profile run: the slots, the rank and the embeddings' slots."""
        return (self.max_loras, self.max_lora_rank, self.embeddings)


def lora_settings(name: str, source: PretrainedConfig, config: ServeConfig, vocab: int) -> LoraSettings | None:
    """The LoRA sizes of ``config`` for ``source`` (None without ``--enable-lora``); what is not modelled is refused."""
    if not config.enable_lora:
        return None
    if config.engine != "vllm":
        raise UnsupportedError("LoRA adapters are modelled for vLLM's budget only (SGLang's LoRA memory pool is not)")
    numbers = config.vllm_version.strip().removeprefix("v").split(".")
    vllm_release(config.vllm_version)  # a bad or V0 version is refused first
    if (int(numbers[0]), int(numbers[1])) < LORA_FIRST_RELEASE:
        raise UnsupportedError(
            f"LoRA in vLLM {config.vllm_version}: releases before 0.12 add lora_extra_vocab_size (256) rows to the "
            "slots and the embeddings, not modelled; pass --vllm-version 0.12 or later"
        )
    if config.pp > 1:
        raise UnsupportedError("LoRA with pipeline parallel is not modelled (use --pp 1)")
    if _is_moe(source):
        raise UnsupportedError(f"{name} is a mixture of experts: LoRA slots on fused experts (FusedMoEWithLoRA) are not modelled")
    embeddings = getattr(source, "model_type", "") in LORA_EMBEDDING_MODEL_TYPES
    if embeddings and vocab > LORA_MAX_VOCAB:
        raise UnsupportedError(
            f"{name}: vLLM refuses LoRA on a head of {vocab:,} tokens (vocab size must be <= {LORA_MAX_VOCAB:,})"
        )
    loras = config.max_loras or DEFAULT_MAX_LORAS
    return LoraSettings(
        max_loras=loras,
        max_lora_rank=config.max_lora_rank or DEFAULT_LORA_RANK,
        max_cpu_loras=config.max_cpu_loras or loras,
        embeddings=embeddings,
    )


def _is_moe(source: PretrainedConfig) -> bool:
    text = getattr(source, "get_text_config", lambda: source)()
    return any((getattr(text, key, 0) or 0) > 1 for key in ("num_local_experts", "num_experts", "n_routed_experts"))


def lora_slot_bytes(model: Any, max_loras: int, rank: int, vocab: int, *, embeddings: bool) -> int:
    """The slots vLLM allocates for ``model`` (one rank's, as built at its shard's shape): for each linear layer
    but the head, ``lora_a`` of rank x input and ``lora_b`` of output x rank per slot; with ``embeddings``, the
    input embedding's (whole ``vocab`` x rank, hidden x rank) and the head's (rank x hidden, whole ``vocab`` x rank).
    Each tensor as the caching allocator rounds it; elements in the model's dtype."""
    head = model.get_output_embeddings()
    embedding = model.get_input_embeddings()
    element = embedding.weight.element_size()  # the model's dtype, whatever format the linear weights are held in
    total = 0
    for module, inputs, outputs in _linear_layers(model):
        if module is not head:
            total += _slot(max_loras * rank * inputs * element) + _slot(max_loras * outputs * rank * element)
    if embeddings:
        hidden = embedding.embedding_dim
        total += _slot(max_loras * vocab * rank * element) + _slot(max_loras * hidden * rank * element)
        total += _slot(max_loras * rank * hidden * element) + _slot(max_loras * vocab * rank * element)
    return total


def punica_bytes(max_num_batched_tokens: int, max_loras: int) -> int:
    """The punica wrapper's index tensors, as ``PunicaWrapperBase`` and ``LoRAKernelMeta.make`` allocate them."""
    tokens = max_num_batched_tokens
    base = 3 * _slot(8 * tokens) + _slot(8 * 2 * tokens)
    meta = 2 * _slot(4 * tokens) + 2 * _slot(4 * (max_loras + 1)) + _slot(4 * (max_loras + 2))
    return base + 2 * meta


def lora_hooks(model: Any, rank: int, *, embeddings: bool) -> list[Any]:
    """Forward hooks that allocate what vLLM's LoRA layers allocate in a forward, while the base layer's output is
    live: a float32 (tokens, rank) shrink buffer per linear layer (one slice: vLLM's packed q/k/v and gate/up
    layers hold theirs in one buffer of three and two), the embedding's (tokens, rank) lookup, the head's float32
    (rows, rank) buffer. The handles, to remove them."""
    head = model.get_output_embeddings()

    def buffer(dtype: torch.dtype | None) -> Callable[[torch.nn.Module, Any, Any], None]:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            rows = args[0].shape[:-1].numel() if args[0].dim() > 1 else args[0].numel()
            scratch = torch.empty(rows, rank, dtype=dtype or torch.float32, device=args[0].device)
            del scratch

        return hook

    handles = []
    for module, _, _ in _linear_layers(model):
        if module is not head or embeddings:
            handles.append(module.register_forward_hook(buffer(None)))
    if embeddings:
        embedding = model.get_input_embeddings()
        handles.append(embedding.register_forward_hook(buffer(embedding.weight.dtype)))
    return handles


def _linear_layers(model: Any) -> list[tuple[Any, int, int]]:
    """The model's linear layers as vLLM's ``LinearBase`` layers stand for them, with their input and output sizes:
    ``nn.Linear`` and the quantized layers holding one (Marlin's, bitsandbytes'), and GPT-2's ``Conv1D`` (a
    transposed weight: input x output)."""
    found = []
    for module in model.modules():
        if isinstance(module, Conv1D):
            found.append((module, int(module.weight.shape[0]), int(module.nf)))
        elif isinstance(getattr(module, "in_features", None), int) and isinstance(getattr(module, "out_features", None), int):
            found.append((module, int(module.in_features), int(module.out_features)))
    return found


def _slot(nbytes: int) -> int:
    return -(-nbytes // _ALLOCATION_ROUND) * _ALLOCATION_ROUND
