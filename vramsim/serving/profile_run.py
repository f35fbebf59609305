"""vLLM's profile run traced on one rank: the weights it holds and the activation peak over them.

One forward over ``max_num_batched_tokens`` tokens keeping logits for ``max_num_seqs`` of them, with the
attention as the engine's backends run in that run (``attention.py``), then the sampler's warm-up over those logits
(``sampler.py``); the steady-state peak over the weights is the activation peak.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import transformers
from transformers import PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from vramsim.analysis.device_memory import device_memory
from vramsim.config import SimulationConfig
from vramsim.config.serving import ServeConfig
from vramsim.estimators.checkpointing import what_if
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.serving.attention import engine_attention, use_profile_attention
from vramsim.serving.lora import lora_hooks, lora_slot_bytes, punica_bytes
from vramsim.serving.multimodal import EncoderBatch, encoder_inputs, tower_modules
from vramsim.serving.mxfp4 import Mxfp4Layout, mxfp4_layout, mxfp4_stored_bytes
from vramsim.serving.sampler import sampler_warmup
from vramsim.serving.versions import TopKTopP, vllm_release
from vramsim.tracer.categories import Category, Phase
from vramsim.tracer.graph import build_graph
from vramsim.tracer.records import BEFORE_TRACE
from vramsim.workload.program import Program, StepObserver, tensors_in
from vramsim.workload.targets import Target

__all__ = ["VLLM_QUANTIZED_LAYERS", "mxfp4_options", "profile_options", "profile_run"]

VLLM_QUANTIZED_LAYERS = {"gptq": "gptq", "awq": "awq", "nf4-dq": "nf4-dq"}
"""vLLM's ``--quantization`` -> the trace side's layers holding the same tensors (``vramsim/workload/quantization/weights.py``).

- gptq, awq: vLLM runs them as ``gptq_marlin`` / ``awq_marlin`` on GPUs of compute capability 8.0+
  (``GPTQMarlinLinearMethod``, ``AWQMarlinLinearMethod`` with ``MarlinLinearKernel``): the packed
  int32 ``qweight`` repacked for Marlin (same bytes), ``scales`` [groups, out] in the model's dtype,
  AWQ's packed ``qzeros``, act order's ``g_idx`` and sort indices, an int32 workspace per layer;
  the layers ``marlin_linear.MarlinLinear`` holds (4 bits, groups of 128, as the common checkpoints).
- nf4-dq: vLLM's ``bitsandbytes``, its in-flight quantization (``bitsandbytes_loader.py``: ``quantize_4bit(...,
  compress_statistics=True, quant_type="nf4")``): NF4 with double-quantized absmax, the layers
  bitsandbytes' ``Linear4bit`` holds.

Under tensor parallel each rank's layers are built at its shard's shape (``rank_config``), so each
rank packs its own shard, as vLLM's column- and row-parallel layers load it."""

_ALLOCATION_ROUND = 512
"""The CUDA caching allocator rounds every block up to 512 B (``kMinBlockSize``)."""


def profile_options(config: ServeConfig, target: Target, dtype: torch.dtype, vocab: int, *, head: bool = True) -> dict[str, Any]:
    """``profile_run``'s keywords for the engine's release: its sampler path (none for a stage without the head),
    the vocabulary it samples over and MXFP4's expert layout (``mxfp4_options``); the attention backend named is
    checked (every fused backend profiles alike)."""
    release = vllm_release(config.vllm_version)
    engine_attention(target, config.attention_backend)  # checks the name; every backend traces alike
    return {"sampler": release.top_k_top_p if head else None, "vocab": vocab, **mxfp4_options(config, target)}


def mxfp4_options(config: ServeConfig, target: Target) -> dict[str, Mxfp4Layout]:
    """``profile_run``'s ``mxfp4`` keyword: the layout of MXFP4 experts on the MoE backend the release picks for the
    target's compute capability (none without ``mxfp4``)."""
    if config.quantization != "mxfp4":
        return {}
    profile = target.profile
    return {"mxfp4": mxfp4_layout(config.vllm_version, profile.vendor, profile.compute_capability, lora=config.enable_lora)}


def profile_run(
    rank: PretrainedConfig,
    target: Target,
    dtype: torch.dtype | None,
    tokens: int,
    seqs: int,
    quantization: str | None,
    *,
    sampler: TopKTopP | None,
    vocab: int,
    encoder_decoder: bool = False,
    embedding: bool = True,
    head: bool = True,
    encoder: EncoderBatch | None = None,
    decoder: bool = True,
    tower: bool = True,
    lora: tuple[int, int, bool] | None = None,
    mxfp4: Mxfp4Layout | None = None,
) -> tuple[int, int, list[str], int, int]:
    """vLLM's profile run on one rank: ``(weights, activation peak over them, trace notes, encoder cache, LoRA)``; a pipeline
    stage without the ``embedding`` or the ``head`` does not count their weights (vLLM's ``PPMissingLayer``). An
    encoder-decoder's (Whisper's) runs the encoder over one input of the encoder's length, as the
    encoder budget of ``profile_run`` (1500 tokens, one 30-s clip) allows, keeping its output for a
    decoder forward over ``tokens`` tokens: the model's own default inputs, one sequence. Attention runs as the
    backends run it there (``attention.use_profile_attention``: the output buffer); ``sampler`` is the release's
    top-k/top-p path for the warm-up over the kept logits of the model's whole ``vocab`` (None: a stage without the
    head, which samples nothing). A multimodal model's run starts as vLLM's does with ``encoder``, its dummy image batch:
    the model's own ``get_image_features`` over it, its output (the encoder cache) kept through the decoder's run and
    the warm-up (``decoder=False``: the encoder alone); ``tower=False`` serves it as text only, without the tower's
    weights. ``lora`` (``LoraSettings.key``: slots, rank, embeddings) runs the LoRA kernels' buffers in the forward and
    counts the slots and the punica wrapper's buffers (``lora.py``): the fifth figure, 0 without it, apart from the
    weights. ``mxfp4``: the MoE backend's layout of MXFP4 experts (``mxfp4.mxfp4_layout``). The fourth figure is the
    encoder cache's bytes (0 without ``encoder``)."""
    from vramsim.analysis.traced import build_and_trace

    positions = _takes_position_ids(rank)

    def inputs(batch: int, length: int) -> dict[str, Any]:
        # vLLM's profile run writes no KV cache: no transformers cache either; its dummy batch's positions are
        # all zeros (a flat batch of max_num_batched_tokens tokens, not one sequence that long)
        zeros = torch.zeros(batch, length, dtype=torch.long)
        text = {"input_ids": zeros, "logits_to_keep": seqs, "use_cache": False} | ({"position_ids": zeros} if positions else {})
        return text | ({} if encoder is None else encoder_inputs(rank, encoder, dtype or torch.float32))

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

    kept: list[int] = []
    images = () if encoder is None else tuple(encoder_inputs(rank, encoder, torch.float32))

    def as_vllm_runs_it(program: Program) -> None:
        if not encoder_decoder:
            use_profile_attention(program.model)
        if lora is not None:
            lora_hooks(program.model, lora[1], embeddings=lora[2])
        if sampler is not None or encoder is not None:
            program.step = lambda p, o: _profile_step(p, o, seqs, vocab, sampler, images, kept, decoder)

    program, _, trace = build_and_trace(rank, config, target, checkpointing="marked", prepare=as_vllm_runs_it)
    outcome = what_if(build_graph(trace), parse_checkpointing("none"))
    memory = device_memory(outcome.timeline, target.profile, training=False)
    resident = sum(_rounded(s.nbytes) for s in trace.storages if s.alloc_clock == BEFORE_TRACE and s.free_clock is None)
    weights = sum(
        _rounded(s.nbytes)
        for s in trace.storages
        if s.alloc_clock == BEFORE_TRACE and s.free_clock is None and s.category in (Category.PARAMETER, Category.BUFFER)
    )
    if quantization == "fp8":
        weights -= _fp8_savings(program.model)
    if quantization == "mxfp4":
        if mxfp4 is None:
            raise ValueError("profile_run: mxfp4 weights need their layout (profile_options' mxfp4)")
        weights -= _mxfp4_savings(program.model, mxfp4)
    weights -= _unheld(program.model, embedding=embedding, head=head)
    adapters = 0
    if lora is not None:
        loras, lora_rank, embeddings = lora
        adapters = lora_slot_bytes(program.model, loras, lora_rank, vocab, embeddings=embeddings) + punica_bytes(tokens, loras)
    if not tower:
        weights -= sum(_rounded(p.numel() * p.element_size()) for m in tower_modules(program.model) for p in m.parameters())
    return weights, memory.peak_bytes - resident, list(trace.notes), kept[-1] if kept else 0, adapters  # the last step's


def _profile_step(
    program: Program,
    observer: StepObserver,
    seqs: int,
    vocab: int,
    sampler: TopKTopP | None,
    images: tuple[str, ...],
    kept: list[int],
    decoder: bool,
) -> None:
    """The encoder over the dummy images (``images``: their keywords in the batch), its outputs kept as vLLM's encoder
    cache keeps them (their bytes appended to ``kept``); then the dummy forward and the sampler's warm-up over the last
    ``seqs`` rows of its logits, ``vocab`` wide (vLLM's whole vocabulary, gathered from a tensor-parallel rank's
    shard), unless ``decoder`` is False."""
    observer.set_phase(Phase.FORWARD)
    text = {k: v for k, v in program.batch.items() if k not in images}
    with torch.no_grad():
        cache: Any = None
        if images:
            features: Any = program.model.get_image_features  # the conditional-generation model's, over its tower
            encoded = features(**{k: program.batch[k] for k in images})
            cache = encoded.pooler_output  # the projected features per image (Qwen: a tuple of them), as vLLM keeps
            del encoded
            kept.append(sum(t.numel() * t.element_size() for t in tensors_in(cache)))
        if decoder:
            outputs = program.model(**text)
            logits = outputs.logits[0, -seqs:]  # (seqs, vocab shard)
            del outputs
            if sampler is not None:
                sampled = sampler_warmup(logits, vocab, sampler)
                observer.mark(tensors_in(sampled), Category.OUTPUT)
                del sampled
            del logits
        del cache  # encoder_cache.clear() after the warm-up


def _takes_position_ids(config: PretrainedConfig) -> bool:
    """Whether the causal LM transformers builds for ``config`` names ``position_ids`` (those that do not have no
    position table to index)."""
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    cls = getattr(transformers, name, None) if name else None
    return cls is not None and "position_ids" in inspect.signature(cls.forward).parameters


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


def _mxfp4_savings(model: torch.nn.Module, layout: Mxfp4Layout) -> int:
    """Bytes MXFP4 experts save, as vLLM's ``Mxfp4MoEMethod.create_weights`` holds them on the backend ``layout``
    names (``mxfp4.py``): each fused experts module's weights, scales and biases at the backend's padded shape, in
    place of the trace's; attention, router, embeddings and head keep the model's dtype. Negative where the padding
    outweighs the packing (never for gpt-oss)."""
    saved = 0
    for module in model.modules():
        if any(p.dim() == 3 for p in module.parameters(recurse=False)):
            held, stored = mxfp4_stored_bytes(module, layout, _ALLOCATION_ROUND)
            saved += held - stored
    return saved


def _rounded(nbytes: int) -> int:
    return -(-nbytes // _ALLOCATION_ROUND) * _ALLOCATION_ROUND
