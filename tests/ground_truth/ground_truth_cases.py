"""Tiny real models and the workloads the CPU ground-truth suite runs on them.

Every case is small enough to run for real on two cores in well under a second, and each
one exercises something the tracer must get right: a model family's attention and cache,
an optimizer's state, mixed precision, recompute, LoRA adapters, or a diffusers model fed
through ``inputs=``/``loss=``. The benchmark ``benchmarks/accuracy.py`` runs the same list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["CASES", "Case"]


@dataclass(frozen=True)
class Case:
    """One workload: a model source and the ``simulate`` options to run it with."""

    id: str
    model: Callable[[], Any]
    """Zero-arg function returning what ``simulate`` takes as ``model`` (a config or a builder)."""
    options: dict[str, Any] = field(default_factory=dict)
    peft: bool = False
    """The model is wrapped by peft (LoRA) inside the workload."""
    tolerance: float = 0.005
    """Largest allowed ``|predicted / measured - 1|``; a looser one says why where it is set."""
    onednn: tuple[str, ...] = ()
    """oneDNN kernels (``conv``, ``bf16-matmul``) whose buffers the prediction counts by the AVX-512 rules of
    ``tracer/kernels/onednn_conv.py`` and ``cpu_kernels.py`` and that read otherwise on an AVX2 CPU (-0.6% to
    -9.9%, measured): their buffers on other ISAs are not modelled (the report says so), so the case is skipped
    there."""

    def source(self) -> Any:
        return self.model()


# -- transformers configs ---------------------------------------------------------------------

_COMMON = {"vocab_size": 128, "max_position_embeddings": 128}


def llama() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        **_COMMON,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        architectures=["LlamaForCausalLM"],
    )


def llama_vocab_4k() -> Any:
    """The tiny Llama with a vocabulary 64 times its width, as Llama 3's is 32 times: the loss's logits weigh."""
    config = llama()
    config.vocab_size = 4096
    return config


def llama_wide() -> Any:
    """The tiny Llama four times as wide, for a few tokens: the weights, their gradients and states weigh most."""
    config = llama()
    config.hidden_size = 256
    config.intermediate_size = 1024
    return config


def mistral() -> Any:
    from transformers import MistralConfig

    # sliding_window < seq_len, so the mask is banded rather than causal.
    return MistralConfig(
        **_COMMON,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=16,
        architectures=["MistralForCausalLM"],
    )


def mixtral() -> Any:
    from transformers import MixtralConfig

    # batched_mm experts: the routing never reads tensor values (the eager loop calls nonzero()).
    return MixtralConfig(
        **_COMMON,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=None,
        experts_implementation="batched_mm",
        architectures=["MixtralForCausalLM"],
    )


def qwen2_moe() -> Any:
    from transformers import Qwen2MoeConfig

    return Qwen2MoeConfig(
        **_COMMON,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=48,
        shared_expert_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        experts_implementation="batched_mm",
        architectures=["Qwen2MoeForCausalLM"],
    )


def qwen2() -> Any:
    from transformers import Qwen2Config

    return Qwen2Config(
        **_COMMON,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        architectures=["Qwen2ForCausalLM"],
    )


def gpt2() -> Any:
    from transformers import GPT2Config

    return GPT2Config(vocab_size=128, n_positions=128, n_embd=64, n_layer=2, n_head=4, architectures=["GPT2LMHeadModel"])


def gemma2() -> Any:
    from transformers import Gemma2Config

    return Gemma2Config(
        **_COMMON,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=16,
        architectures=["Gemma2ForCausalLM"],
    )


def phi3() -> Any:
    from transformers import Phi3Config

    return Phi3Config(
        **_COMMON,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=0,
        architectures=["Phi3ForCausalLM"],
    )


def bert(architecture: str) -> Callable[[], Any]:
    def build() -> Any:
        from transformers import BertConfig

        return BertConfig(
            vocab_size=128,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=128,
            num_labels=3,
            architectures=[architecture],
        )

    return build


def t5() -> Any:
    from transformers import T5Config

    return T5Config(
        vocab_size=128,
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
        architectures=["T5ForConditionalGeneration"],
    )


def vit() -> Any:
    from transformers import ViTConfig

    return ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=5,
        architectures=["ViTForImageClassification"],
    )


# -- diffusers builders -----------------------------------------------------------------------


def unet() -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        from diffusers import UNet2DModel

        return UNet2DModel(
            sample_size=16,
            in_channels=3,
            out_channels=3,
            layers_per_block=1,
            block_out_channels=(32, 64),
            down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"),
            norm_num_groups=8,
            attention_head_dim=16,
        )

    return build


def unet_inputs(batch_size: int, seq_len: int) -> dict[str, Any]:
    """``seq_len`` is the image side; the timestep is one per sample."""
    return {"sample": torch.randn(batch_size, 3, seq_len, seq_len), "timestep": torch.ones(batch_size, dtype=torch.long)}


def unet_loss(outputs: Any) -> torch.Tensor:
    return outputs.sample.float().pow(2).mean()


class VaeDecoder(torch.nn.Module):
    """Latents in, image out: the decode half of a latent-diffusion pipeline."""

    def __init__(self) -> None:
        super().__init__()
        from diffusers import AutoencoderKL

        self.vae = AutoencoderKL(
            in_channels=3,
            out_channels=3,
            latent_channels=4,
            block_out_channels=(32, 64),
            layers_per_block=1,
            down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
            up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
            norm_num_groups=8,
            sample_size=32,
        )

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(latents).sample


def vae_decoder() -> Callable[[], torch.nn.Module]:
    return VaeDecoder


class TiledVaeDecoder(VaeDecoder):
    """The same decode after ``vae.enable_tiling()``: latents wider than 16 (sample_size 32 / 2) are
    decoded in overlapping tiles, blended and concatenated, diffusers' own tiled path."""

    def __init__(self) -> None:
        super().__init__()
        self.vae.enable_tiling()


def tiled_vae_decoder() -> Callable[[], torch.nn.Module]:
    return TiledVaeDecoder


def tiny_sdxl() -> str:
    """A StableDiffusionXLPipeline folder (two CLIP text encoders, a text-time UNet, an fp32 VAE)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-sdxl")


def tiny_taesd() -> str:
    """A tiny AutoencoderTiny folder (TAESD's architecture: 4 latent channels, one 2x upsampling)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-taesd")


def tiny_flux() -> str:
    """A FluxPipeline folder (CLIP, T5, a guidance-embedding FluxTransformer2DModel, a 16-channel-packing VAE)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-flux")


def tiny_flux_kontext() -> str:
    """A FluxKontextPipeline folder: tiny FLUX's components with an 8x VAE (four 16-channel blocks), as the pipeline
    sizes its output and reference image for FLUX's 8x VAE (about 1024**2 pixels each)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-flux-kontext")


def tiny_sd3() -> str:
    """A StableDiffusion3Pipeline folder (CLIP-L and CLIP-G with projections, T5, an MMDiT-X transformer with one dual-attention
    block, a 16-channel VAE)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-sd3")


def tiny_ltx() -> str:
    """An LTXPipeline folder (T5, an LTX-Video transformer, a 0.9.1-style causal video VAE with timestep conditioning and
    noise injection)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-ltx")


def tiny_cogvideox() -> str:
    """A CogVideoXPipeline folder (T5, a CogVideoX transformer with 3D rotary embeddings, a causal 3D VAE)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-cogvideox")


def tiny_hunyuan_video() -> str:
    """A HunyuanVideoPipeline folder (Llama, CLIP, a guidance-embedding HunyuanVideo transformer, a causal 3D VAE), no
    scheduler config (as the bundled one)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-hunyuan-video")


def tiny_qwen_image() -> str:
    """A QwenImagePipeline folder (a whole Qwen2.5-VL, a Qwen-Image transformer, its one-frame causal VAE), no scheduler
    config (as the bundled one)."""
    return str(Path(__file__).parent / "pipelines" / "tiny-qwen-image")


def vae_inputs(batch_size: int, seq_len: int) -> dict[str, Any]:
    """``seq_len`` is the latent side."""
    return {"latents": torch.randn(batch_size, 4, seq_len, seq_len)}


def t5_forward_inputs(batch_size: int, seq_len: int) -> dict[str, Any]:
    ids = torch.randint(0, 128, (batch_size, seq_len))
    return {"input_ids": ids, "decoder_input_ids": ids[:, : seq_len // 2].clone()}


def lm_inputs(batch_size: int, seq_len: int) -> dict[str, Any]:
    """Token ids with labels. peft's ``PeftModel.forward(*args, **kwargs)`` hides the base
    model's ``labels`` parameter from vramsim's input synthesis, so LoRA cases pass their own."""
    ids = torch.randint(0, 128, (batch_size, seq_len))
    return {"input_ids": ids, "labels": ids.clone()}


def logits_loss(outputs: Any) -> torch.Tensor:
    """A custom loss on the logits: it replaces the model's own, so the batch carries no labels."""
    return outputs.logits.float().pow(2).mean()


def rmsprop(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """A custom optimizer factory: RMSprop with momentum (two state tensors per parameter)."""
    return torch.optim.RMSprop(params, lr=1e-3, momentum=0.9, foreach=False)


def adam_amsgrad(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """A custom optimizer factory: Adam with AMSGrad's third state tensor."""
    return torch.optim.Adam(params, lr=1e-3, amsgrad=True, foreach=False)


# -- the cases --------------------------------------------------------------------------------

_B2S32 = {"batch_size": 2, "seq_len": 32}
_TRAIN = {"task": "train", **_B2S32}
_FORWARD = {"task": "forward", **_B2S32}
_FEW_TOKENS = {"task": "train", "batch_size": 1, "seq_len": 8}
_GENERATE = {"task": "generate", **_B2S32, "max_new_tokens": 4}
_LORA_LLAMA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
_LORA_TRAIN = {**_TRAIN, "inputs": lm_inputs}
_ACTIVATIONS = {"task": "train", "batch_size": 4, "seq_len": 64}
"""Long enough that activations, not the optimizer step, set the peak."""

CASES: list[Case] = [
    # Llama: GQA decoder, the reference family, across every option.
    Case("llama-train-adamw", llama, _TRAIN),
    Case("llama-train-adamw-batch4", llama, {**_TRAIN, "batch_size": 4}),
    Case("llama-train-adamw-forloop", llama, {**_TRAIN, "optimizer": "adamw-foreach"}),  # torch's CPU default
    Case("llama-train-sgd-momentum", llama, {**_TRAIN, "optimizer": "sgd"}),
    Case("llama-train-adafactor", llama, {**_TRAIN, "optimizer": "adafactor"}),
    Case("llama-train-custom-rmsprop", llama, {**_TRAIN, "optimizer": rmsprop}),
    # Muon's Newton-Schulz step (bf16 matmuls, one matrix at a time) sets the peak with so few tokens.
    # Muon's bf16 Newton-Schulz matmuls: on an AVX2 CPU the real run holds 7.2 KB more than the model of its kernels.
    Case(
        "llama-train-muon", llama, {"task": "train", "batch_size": 1, "seq_len": 4, "optimizer": "muon"}, onednn=("bf16-matmul",)
    ),
    Case("llama-train-grad-checkpointing", llama, {**_TRAIN, "gradient_checkpointing": True}),
    Case("llama-train-bf16-autocast", llama, {**_TRAIN, "mixed_precision": "bf16"}),
    Case("llama-train-bf16-weights", llama, {**_TRAIN, "dtype": "bf16"}),
    Case("llama-train-lora", llama, {**_LORA_TRAIN, "lora": _LORA_LLAMA}, peft=True),
    # QLoRA: bitsandbytes NF4 weights (the library quantizing for real on the CPU), LoRA adapters, peft's k-bit prep.
    Case(
        "llama-qlora-nf4-double-quant",
        llama,
        {**_LORA_TRAIN, "dtype": "bf16", "quantization": "nf4-dq", "lora": _LORA_LLAMA},
        peft=True,
    ),
    Case(
        "llama-qlora-fp4-bf16-autocast",
        llama,
        {**_LORA_TRAIN, "dtype": "bf16", "quantization": "fp4", "lora": _LORA_LLAMA, "mixed_precision": "bf16"},
        peft=True,
    ),
    Case("llama-train-dora", llama, {**_LORA_TRAIN, "lora": {**_LORA_LLAMA, "use_dora": True}}, peft=True),
    # The training loop: accumulation (3 micro-steps, gradients add up in .grad), clipping (foreach
    # clip_grad_norm_ with the for-loop AdamW), the plain loop's outputs held through backward, a custom loss.
    Case("llama-train-grad-accum-3", llama, {**_TRAIN, "grad_accum": 3}),
    Case("llama-train-clip-grad-norm", llama, {**_TRAIN, "max_grad_norm": 1.0, "optimizer": "adamw-foreach"}),
    Case("llama-train-keep-outputs", llama, {**_TRAIN, "keep_outputs": True}),
    Case("llama-train-custom-loss", llama, {**_TRAIN, "loss": logits_loss}),
    # torchtune's chunked cross-entropy (vramsim/workload/losses.py): the head per chunk, each chunk upcast in its own
    # loss; a 4,096-token vocabulary, so the logits are a large share of the step.
    Case("llama-train-chunked-ce-vocab4k", llama_vocab_4k, {**_TRAIN, "loss": "chunked-ce:4"}),
    Case("llama-train-chunked-ce-vocab4k-bf16-weights", llama_vocab_4k, {**_TRAIN, "dtype": "bf16", "loss": "chunked-ce"}),
    # torchtune's optimizer_in_bwd (vramsim/workload/optimizer_in_backward.py): an AdamW per parameter stepped by its
    # post-accumulate-grad hook, each gradient freed after its step (-20% here); fused and for-loop kernels.
    Case("llama-train-optimizer-in-backward", llama_wide, {**_FEW_TOKENS, "optimizer_in_backward": True}),
    Case(
        "llama-train-optimizer-in-backward-foreach-bf16",
        llama_wide,
        {**_FEW_TOKENS, "dtype": "bf16", "optimizer": "adamw-foreach", "optimizer_in_backward": True},
    ),
    # The torchtune recipe's defaults together: bf16 weights, the chunked loss, fused AdamW.
    Case("llama-train-recipe-torchtune", llama_vocab_4k, {**_TRAIN, "recipe": "torchtune"}),
    # torchao's float8 training (vramsim/workload/float8.py): Float8Linear's casts and scales, each Float8TrainingTensor
    # op's own ops (the operand copies, torch._scaled_mm's CPU kernel computing in float32), the head kept bf16.
    Case("llama-train-float8-tensorwise", llama, {**_TRAIN, "dtype": "bf16", "float8": "tensorwise"}),
    Case("llama-train-float8-rowwise", llama, {**_TRAIN, "dtype": "bf16", "float8": "rowwise"}),
    Case("llama-train-float8-rowwise-fp32-weights", llama, {**_TRAIN, "float8": "rowwise"}),
    Case("llama-forward-fp32", llama, _FORWARD),
    Case("llama-forward-bf16-weights", llama, {**_FORWARD, "dtype": "bf16"}),
    Case("llama-forward-bf16-autocast", llama, {**_FORWARD, "mixed_precision": "bf16"}),
    Case("llama-generate-fp32", llama, _GENERATE),
    Case("llama-generate-bf16-weights", llama, {**_GENERATE, "dtype": "bf16"}),
    Case("llama-generate-static-cache", llama, {**_GENERATE, "cache_implementation": "static"}),
    # Mistral: sliding-window attention shorter than the sequence.
    Case("mistral-sliding-train", mistral, _TRAIN),
    Case("mistral-sliding-forward-bf16", mistral, {**_FORWARD, "dtype": "bf16"}),
    Case("mistral-sliding-generate", mistral, _GENERATE),
    # Mixture of experts.
    Case("mixtral-moe-train", mixtral, _TRAIN),
    Case("mixtral-moe-generate", mixtral, _GENERATE),
    Case("qwen2-moe-train-adafactor", qwen2_moe, {**_TRAIN, "optimizer": "adafactor"}),
    # Qwen2: tied embeddings.
    Case("qwen2-train-custom-amsgrad", qwen2, {**_TRAIN, "optimizer": adam_amsgrad}),
    Case("qwen2-generate-bf16-weights", qwen2, {**_GENERATE, "dtype": "bf16"}),
    Case("qwen2-train-lora-bf16-autocast", qwen2, {**_LORA_TRAIN, "mixed_precision": "bf16", "lora": _LORA_LLAMA}, peft=True),
    # GPT-2: learned positions, Conv1D projections, eager attention.
    Case("gpt2-train", gpt2, _TRAIN),
    Case(
        "gpt2-train-lora",
        gpt2,
        {**_LORA_TRAIN, "lora": {"r": 4, "target_modules": ["c_attn"], "fan_in_fan_out": True}},
        peft=True,
    ),
    Case("gpt2-generate", gpt2, _GENERATE),
    # Gemma-2 and Phi-3.
    Case("gemma2-train", gemma2, _TRAIN),
    Case("gemma2-forward-bf16-weights", gemma2, {**_FORWARD, "dtype": "bf16"}),
    Case("phi3-train-grad-checkpointing", phi3, {**_TRAIN, "gradient_checkpointing": True}),
    Case("phi3-generate", phi3, _GENERATE),
    # Encoder-only.
    Case("bert-mlm-train", bert("BertForMaskedLM"), _TRAIN),
    Case("bert-seqcls-train-sgd", bert("BertForSequenceClassification"), {**_TRAIN, "optimizer": "sgd"}),
    Case("bert-seqcls-forward", bert("BertForSequenceClassification"), _FORWARD),
    # Encoder-decoder.
    Case("t5-train", t5, _TRAIN),
    Case("t5-forward", t5, {**_FORWARD, "inputs": t5_forward_inputs}),
    # Vision transformer (seq_len is unused: the image size comes from the config).
    Case("vit-train", vit, {"task": "train", "batch_size": 4, "seq_len": 1}),
    Case("vit-forward-bf16-autocast", vit, {"task": "forward", "batch_size": 4, "seq_len": 1, "mixed_precision": "bf16"}),
    # diffusers: a UNet trained on a denoising-style loss, and a VAE decoding latents.
    # Batch 1 at 16x16: most convolutions take the Slow2d (im2col) backend, whose column
    # buffers tracer/kernels/cpu_kernels.py models exactly; the up path's concatenated 96-channel inputs
    # exceed Convolution.cpp's 20480-element threshold and go to oneDNN.
    Case(
        "unet2d-train-batch1", unet, {"task": "train", "batch_size": 1, "seq_len": 16, "inputs": unet_inputs, "loss": unet_loss}
    ),
    # Batch 2 sends fp32 convolutions to oneDNN (Convolution.cpp ConvParams::use_mkldnn: batch > 1):
    # its reorder buffers are tracer/kernels/onednn_conv.py's.
    Case(
        "unet2d-train-batch2-onednn-conv",
        unet,
        {"task": "train", "batch_size": 2, "seq_len": 16, "inputs": unet_inputs, "loss": unet_loss},
        onednn=("conv",),
    ),
    Case("vae-decode-forward", vae_decoder, {"task": "forward", "batch_size": 1, "seq_len": 8, "inputs": vae_inputs}),
    # The VAE decode of 24x24 latents, whole and tiled (2x2 tiles of 16 with 4 overlapping, blended row by row).
    Case(
        "vae-decode-untiled-24-forward",
        vae_decoder,
        {"task": "forward", "batch_size": 1, "seq_len": 24, "inputs": vae_inputs},
        onednn=("conv",),
    ),
    Case(
        "vae-decode-tiled-24-forward",
        tiled_vae_decoder,
        {"task": "forward", "batch_size": 1, "seq_len": 24, "inputs": vae_inputs},
        onednn=("conv",),
    ),
    # A diffusion pipeline by folder, run as StableDiffusionXLPipeline.__call__: two text encoders, 2 denoising
    # steps with guidance (batch doubled), the decode (which sets the peak at 64x64) and the on-device postprocess.
    Case(
        "sdxl-pipeline-generate",
        tiny_sdxl,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64},
        onednn=("conv",),
    ),
    # diffusers' own weight hooks on the same call (vramsim/workload/diffusion/weight_hooks.py): the UNet's layerwise
    # casting (fp8 storage, each layer upcast to fp32 while it runs); group offloading of every component, one block
    # (block_level:1) or one layer (leaf_level) resident at a time, the host held as stand-ins that own no memory
    # (placement.py), so the real run measures what the compute device holds.
    Case(
        "sdxl-pipeline-generate-layerwise-fp8",
        tiny_sdxl,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "layerwise_casting": "fp8_e4m3"},
        onednn=("conv",),
    ),
    Case(
        "sdxl-pipeline-generate-group-offload-block",
        tiny_sdxl,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "group_offload": "block_level:1"},
        onednn=("conv",),
    ),
    Case(
        "sdxl-pipeline-generate-group-offload-leaf",
        tiny_sdxl,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "group_offload": "leaf_level"},
        onednn=("conv",),
    ),
    # The UNet alone with diffusers' classic AttnProcessor (the VAE keeps SDPA); a tiny AutoencoderTiny decoding in
    # place of the pipeline's VAE (pipe.vae = AutoencoderTiny(...)).
    Case(
        "sdxl-pipeline-generate-unet-attnprocessor",
        tiny_sdxl,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "attention_processor": "unet=AttnProcessor"},
        onednn=("conv",),
    ),
    Case(
        "sdxl-pipeline-generate-tiny-vae",
        tiny_sdxl,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "vae": tiny_taesd()},
        onednn=("conv",),
    ),
    # FluxPipeline.__call__: CLIP pooled + T5 at 512 tokens, packed latents and img_ids, 2 transformer steps with the
    # guidance embedding (no doubling), unpack, shift and decode (which sets the peak at 128x128).
    Case(
        "flux-pipeline-generate",
        tiny_flux,
        {"task": "generate", "num_inference_steps": 2, "height": 128, "width": 128},
        onednn=("conv",),
    ),
    # FluxKontextPipeline.__call__: the output rescaled to max_area (1024x1024; 768x1360 asked stays 768x1360), the
    # reference image resized to the preferred resolution (1024x1024; 752x1392), VAE-encoded, packed and put after the
    # noise tokens for 2 transformer steps, one copy per image; the decode sets the peak.
    Case("flux-kontext-pipeline-generate", tiny_flux_kontext, {"task": "generate", "num_inference_steps": 2}, onednn=("conv",)),
    Case(
        "flux-kontext-pipeline-generate-2-images",
        tiny_flux_kontext,
        {"task": "generate", "num_inference_steps": 2, "height": 768, "width": 1360, "num_images": 2},
        onednn=("conv",),
    ),
    # Several quantized components, as PipelineQuantizationConfig(components_to_quantize=[...]) names them: torchao's
    # int8wo on the transformer and the T5 encoder (each through its own library's torchao path).
    Case(
        "flux-pipeline-generate-int8wo-transformer-t5",
        tiny_flux,
        {
            "task": "generate",
            "num_inference_steps": 2,
            "height": 128,
            "width": 128,
            "quantization": "int8wo",
            "quantized_components": "transformer,text_encoder_2",
        },
        onednn=("conv",),
    ),
    # StableDiffusion3Pipeline.__call__: three encoders on the prompt and on the empty negative one (CLIP pair padded to T5's
    # width, T5 at 256 tokens), 2 transformer steps on the doubled batch, the shifted decode (which sets the peak at 64x64).
    Case(
        "sd3-pipeline-generate",
        tiny_sd3,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64},
        onednn=("conv",),
    ),
    # LTXPipeline.__call__: T5 on the prompt and the empty negative one (128 tokens, the mask to the transformer), packed
    # fp32 latents of 9 frames, 2 transformer steps on the doubled batch, unpack, de-normalize, the decode noise at
    # decode_timestep and the timestep-conditioned decode (which sets the peak at 64x96).
    Case(
        "ltx-pipeline-generate",
        tiny_ltx,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 96, "num_frames": 9},
    ),
    # CogVideoXPipeline.__call__: T5 on the prompt and the empty negative one (226 tokens, no mask), frame-major latents
    # of 9 frames with the 3D rotary embeddings, 2 DDIM steps on the doubled batch, the decode (the peak, at 32x48).
    Case("cogvideox-pipeline-generate", tiny_cogvideox, {"task": "generate", "num_inference_steps": 2}),
    # HunyuanVideoPipeline.__call__: Llama over the template and the prompt with every hidden state kept, CLIP pooled, fp32
    # latents of 9 frames, 2 transformer steps with the guidance embedding (no doubling), the decode (the peak).
    Case(
        "hunyuan-video-pipeline-generate",
        tiny_hunyuan_video,
        {"task": "generate", "num_inference_steps": 2, "height": 32, "width": 48, "num_frames": 9, "max_sequence_length": 16},
    ),
    # QwenImagePipeline.__call__: Qwen2.5-VL over the template and the prompt (every hidden state and the logits kept),
    # the real tokens gathered, packed latents, 2 transformer steps (no true CFG without a negative prompt), the decode.
    Case(
        "qwen-image-pipeline-generate",
        tiny_qwen_image,
        {"task": "generate", "num_inference_steps": 2, "height": 64, "width": 64, "max_sequence_length": 16},
    ),
    # One training step of a pipeline's denoiser as diffusers' scripts run it (vramsim/workload/diffusion/training.py): a LoRA of
    # the FLUX transformer on cached latents, CLIP and T5 encoding the prompt, the flow-matching loss (the peak: the
    # single block's attention backward, whose grad_out the CPU kernel copies); the whole SDXL UNet trained in fp32
    # with the VAE encode and both text encoders each step.
    Case(
        "flux-pipeline-train-lora",
        tiny_flux,
        {"task": "train", "lora": 4, "height": 64, "width": 64, "cache_latents": True, "max_sequence_length": 32},
    ),
    Case("sdxl-pipeline-train-full", tiny_sdxl, {"task": "train", "height": 32, "width": 32}),
    # The whole SD3 MMDiT-X trained in fp32 as train_dreambooth_sd3.py runs it: the three encoders on the prompt (T5 at the
    # script's 77 tokens), cached latents, logit-normal timesteps, the preconditioned flow-matching loss, AdamW.
    Case("sd3-pipeline-train-full", tiny_sd3, {"task": "train", "height": 64, "width": 64, "cache_latents": True}),
    # Checkpointing choices computed from the graph of one trace, against real runs with torch's checkpointing.
    Case("llama-train-every2-checkpointing", llama, {**_ACTIVATIONS, "checkpointing": "every:2"}),
    Case("llama-train-selective-checkpointing", llama, {**_ACTIVATIONS, "checkpointing": "selective"}),
    Case("llama-train-torchtitan-checkpointing", llama, {**_ACTIVATIONS, "checkpointing": "selective:torchtitan"}),
    Case("llama-train-selective-bf16-autocast", llama, {**_ACTIVATIONS, "checkpointing": "selective", "mixed_precision": "bf16"}),
    Case("mixtral-moe-train-selective-checkpointing", mixtral, {**_ACTIVATIONS, "checkpointing": "selective"}),
    Case("bert-mlm-train-full-checkpointing", bert("BertForMaskedLM"), {**_ACTIVATIONS, "checkpointing": "full"}),
]
