"""The assumptions a serving budget lists: the memory it takes as given and what its traces leave out."""

from __future__ import annotations

from vramsim.config.serving import VLLM_QUANTIZATION_NAMES, ServeConfig
from vramsim.estimators import serving
from vramsim.estimators.kv_cache import LayerCache
from vramsim.results.report import Assumption
from vramsim.serving.lora import LoraSettings
from vramsim.serving.multimodal import QWEN2_VL_MAX_PIXELS, QWEN2_VL_MIN_PIXELS, EncoderBatch
from vramsim.serving.mxfp4 import mxfp4_layout
from vramsim.serving.profile_run import VLLM_QUANTIZED_LAYERS
from vramsim.serving.speculative import Draft
from vramsim.serving.versions import vllm_release
from vramsim.workload.targets import Target

__all__ = ["adapter_notes", "budget_assumptions", "encoder_note", "hybrid_note", "multimodal_note", "pipeline_note"]


def budget_assumptions(
    config: ServeConfig,
    non_torch: list[tuple[str, int, str]],
    graphs: serving.CudaGraphEstimate | None,
    context: int,
    notes: list[str],
    target: Target,
) -> list[Assumption]:
    """Every budget's assumptions: the memory outside the traces, the weights' format, what the traces measure."""
    return [
        *_memory_notes(config, non_torch, graphs, context),
        *_quantization_notes(config, target),
        *_trace_notes(config, notes),
    ]


def _memory_notes(
    config: ServeConfig, non_torch: list[tuple[str, int, str]], graphs: serving.CudaGraphEstimate | None, context: int
) -> list[Assumption]:
    """The memory no trace holds: outside torch, the CUDA graph pool, the CUDA context."""
    found = [Assumption(name=name, detail=source, bytes=nbytes) for name, nbytes, source in non_torch]
    if graphs is not None:
        found.append(
            Assumption(
                name="cuda_graph_pool",
                bytes=graphs.total_bytes,
                detail=f"vLLM's profile_cudagraph_memory over {len(graphs.mixed_sizes)} PIECEWISE sizes (largest "
                f"{graphs.mixed_sizes[-1]}) and {len(graphs.decode_sizes)} FULL decode sizes"
                + (" (each captured with and without LoRA adapters active)" if graphs.captures_per_size > 1 else "")
                + ": the largest capture's "
                f"traced activations twice (its warm-up's cached blocks and the graph pool, "
                f"{graphs.activation_bytes / 2**20:,.1f} MiB each), plus each further graph at "
                "VLLM_CUDA_GRAPH_PER_GRAPH_BYTES (1 MiB, vLLM's floor for a graph's driver memory: an assumption, "
                "a lower bound); subtracted as vLLM >= 0.21 does (before it the graphs are captured after the "
                "KV cache, in the share utilization leaves out); --enforce-eager drops it",
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
    return found


def _quantization_notes(config: ServeConfig, target: Target) -> list[Assumption]:
    """How the quantized weights vLLM holds are counted (the trace side's layers, or FP8's bytes)."""
    if config.quantization in VLLM_QUANTIZED_LAYERS:
        return [
            Assumption(
                name=f"{config.quantization}_weights",
                detail=f"vLLM --quantization {VLLM_QUANTIZATION_NAMES.get(config.quantization, config.quantization)} "
                f"as the trace side's {VLLM_QUANTIZED_LAYERS[config.quantization]} layers hold it "
                "(vramsim/serving/profile_run.py VLLM_QUANTIZED_LAYERS); vLLM fuses q/k/v and gate/up into one "
                "layer each, so it holds fewer per-layer workspaces and rounds fewer tensors",
            )
        ]
    if config.quantization == "mxfp4":
        profile = target.profile
        layout = mxfp4_layout(config.vllm_version, profile.vendor, profile.compute_capability, lora=config.enable_lora)
        lora = " with LoRA" if config.enable_lora else ""
        padding = f"the intermediate size padded to {layout.intermediate_multiple}" + (
            f" and the hidden size to {layout.hidden_multiple}" if layout.hidden_multiple > 1 else ""
        )
        return [
            Assumption(
                name="mxfp4_weights",
                detail=f"fused expert weights as vLLM's Mxfp4MoEMethod creates them for its {layout.backend} MoE "
                f"backend (vramsim/serving/mxfp4.py: vLLM {config.vllm_version}'s default on this compute capability{lora}): "
                f"uint8 blocks of two 4-bit values per byte plus a uint8 scale per 32 values, bf16 expert biases, "
                f"{padding}; attention, router, embeddings and head in the model's dtype; a layout the kernels make "
                "after loading (Triton's swizzle) is not counted; the profile forward runs the experts in the model's dtype",
            )
        ]
    if config.quantization == "fp8":
        return [
            Assumption(
                name="fp8_weights",
                detail="linear weights (not the LM head or MoE routers) and fused "
                "expert weights in one byte per element plus one fp32 scale per weight (per expert), "
                "as vLLM's Fp8LinearMethod / Fp8MoEMethod store them; the profile forward is "
                "traced with the model's dtype, so FP8 GEMMs' input-quantization copies are not "
                "counted",
            )
        ]
    return []


def _trace_notes(config: ServeConfig, notes: list[str]) -> list[Assumption]:
    """What the profile forward and the cache probes measure, and the trace's own notes."""
    release = vllm_release(config.vllm_version)
    sampler = (
        "top-k/top-p by PyTorch's sort (sorted values, int64 indices, masks, a cumulative softmax; on CUDA the "
        "sort's int64 reverse indices and cub's third keys and values buffers, tracer/kernels/gpu_kernels.py)"
        if release.top_k_top_p == "sort"
        else "top-k/top-p by the Triton kernel, in place (its ~80 MiB of per-program buffers not counted)"
    )
    return [
        Assumption(
            name="profile_forward",
            detail=f"vLLM {config.vllm_version}'s profile run: one sequence of max_num_batched_tokens tokens "
            "keeping logits for max_num_seqs rows, then the sampler's warm-up over them (float32 logits, "
            f"{sampler}, softmax and exponential noise; vramsim/serving/sampler.py); the hidden states vLLM "
            "still holds while it samples are not counted"
            if config.engine == "vllm"
            else "SGLang subtracts no profile forward from its token pool",
        ),
        Assumption(
            name="attention_backend",
            detail=f"vLLM's {config.attention_backend or 'default'} backend: fused (no score matrix, softcap in the "
            "kernel), and in the profile run, which builds no attention metadata, it only returns its output "
            "buffer; traced so (vramsim/serving/attention.py), whatever transformers' default attention is",
        ),
        Assumption(
            name="kv_layers",
            detail="bytes per token per layer measured from the cache transformers "
            "builds at three prompt lengths; sliding layers need their window plus one step's tokens "
            "per request (SlidingWindowSpec), state layers their state once; MLA layers store the "
            "compressed latent (kv_a_proj_with_mqa output)",
        ),
        *(Assumption(name="data_dependent", detail=note) for note in dict.fromkeys(notes)),
    ]


def pipeline_note(pp: int, bounds: list[tuple[int, int]]) -> Assumption:
    """How a pipeline-parallel budget's stages are traced, and which stage its figures are."""
    return Assumption(
        name="pipeline_stages",
        detail=f"{pp} stages of decoder layers "
        f"{', '.join(f'{a}-{b - 1}' for a, b in bounds)} (vLLM's get_pp_indices); each stage's profile "
        "forward is traced as a model of its layers with the embedding lookup and the logits, which "
        "vLLM's middle stages replace by receiving hidden states and residual; the figures are the "
        "stage with the fewest blocks",
    )


def hybrid_note(hybrid: serving.HybridGroups | None, layers: list[LayerCache]) -> list[Assumption]:
    """vLLM's KV cache groups where layers differ, and the Mamba page attention blocks are sized to."""
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


def encoder_note(encoder_decoder: bool, tokens: int) -> list[Assumption]:
    """How an encoder-decoder's cross-attention and profile forward are counted."""
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


def multimodal_note(kind: str | None, images: EncoderBatch | None) -> list[Assumption]:
    """How a multimodal model's encoder profile is traced, or that it is served as text only."""
    if kind is None:
        return []
    if images is None:
        return [
            Assumption(
                name="text_only",
                detail="--limit-mm-per-prompt allows no item: no encoder profile, and the vision tower's weights are "
                "not held (vLLM builds no tower then)",
            )
        ]
    return [
        Assumption(
            name="encoder_profile",
            detail=f"vLLM's encoder profile: {images.items} dummy {images.modality}(s) of {images.width} x "
            f"{images.height} ({images.tokens_per_item:,} tokens each; encoder budget {images.encoder_budget:,} "
            f"tokens, {images.items_per_prompt} per prompt) through the model's own get_image_features, attention "
            "as a fused kernel (its output only); the outputs kept through the decoder's run; the decoder's dummy run "
            "fed token ids (vLLM's feeds embeddings from its persistent buffer)"
            + (_pixels_note(images.pixel_bounds) if images.pixel_bounds else "")
            + (_crops_note(images) if images.crops_per_item > 1 else ""),
        )
    ]


def _pixels_note(bounds: tuple[int, int]) -> str:
    """Where Qwen's ``max_pixels`` came from: the hub's value unless ``--mm-processor-kwargs`` set the bounds."""
    if bounds == (QWEN2_VL_MIN_PIXELS, QWEN2_VL_MAX_PIXELS):
        return (
            f"; the image processor's max_pixels taken as the hub's preprocessor_config.json states it ({QWEN2_VL_MAX_PIXELS:,})"
        )
    return f"; the image processor's min_pixels {bounds[0]:,}, max_pixels {bounds[1]:,} (with --mm-processor-kwargs)"


def _crops_note(images: EncoderBatch) -> str:
    """Gemma 3's pan-and-scan, as the tower runs it."""
    crops = images.crops_per_item
    return (
        f"; pan-and-scan (--mm-processor-kwargs): {crops - 1} crops and the whole image each, {images.items * crops} "
        f"inputs of {images.width} x {images.height} through the tower"
    )


def adapter_notes(lora: LoraSettings | None, lora_bytes: int, draft: Draft | None) -> list[Assumption]:
    """What LoRA slots and a speculative proposer add, and what about them is not modelled."""
    found = []
    if lora is not None:
        wrapped = "every linear layer, the embedding and the head" if lora.embeddings else "every linear layer"
        found.append(
            Assumption(
                name="lora_slots",
                bytes=lora_bytes,
                detail=f"vLLM's LoRA slots for {lora.max_loras} adapters of rank {lora.max_lora_rank} in {wrapped} "
                "(lora_a and lora_b per slot, the model's dtype) and the punica wrapper's index buffers, allocated "
                "with the weights (vramsim/serving/lora.py); the profile forward runs each layer's shrink buffer; "
                f"--max-cpu-loras {lora.max_cpu_loras} are host memory; every CUDA graph is captured with and "
                "without adapters active (cudagraph_specialize_lora), counted in cuda_graph_pool",
            )
        )
    if draft is not None and draft.method == "ngram":
        found.append(
            Assumption(
                name="speculative_ngram",
                detail=f"ngram proposes {draft.num_speculative_tokens} tokens on the host (NgramProposer): no device "
                f"memory; the CUDA graph sizes are rounded to multiples of {draft.num_speculative_tokens + 1} "
                "(adjust_cudagraph_sizes_for_spec_decode); the rejection sampler's warm-up is not modelled",
            )
        )
    elif draft is not None:
        found.append(
            Assumption(
                name="speculative_draft",
                bytes=draft.weights_bytes,
                detail=f"the draft {draft.model} at the target's tensor-parallel size and dtype: its weights, its "
                "layers in every KV block beside the target's, its dummy run over the batch with the target's "
                f"hidden states held ({draft.activation_peak_bytes / 2**20:,.1f} MiB; the activation peak is the "
                "larger of that and the target's); vLLM captures no CUDA graphs for it (its dispatcher gets keys "
                "for EAGLE-family proposers only) and the target's are rounded to multiples of "
                f"{draft.num_speculative_tokens + 1} tokens; the rejection sampler's warm-up is not modelled "
                "(vramsim/serving/speculative.py)",
            )
        )
    return found
