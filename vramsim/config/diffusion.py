"""The options only a diffusion pipeline reads: image and video sizes, denoising, the VAE and offload."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vramsim.config.checks import check_count
from vramsim.config.options import as_is, option
from vramsim.config.workload import WorkloadOptions
from vramsim.errors import ConfigError

__all__ = ["ATTENTION_PROCESSORS", "DiffusionOptions", "attention_processors", "group_offload_layout"]

_LAYERWISE_CASTING = ("fp8_e4m3", "fp8_e5m2")
"""``layerwise_casting``'s storage dtypes (``torch.float8_e4m3fn``, ``torch.float8_e5m2``)."""


def group_offload_layout(text: str) -> tuple[str, int | None]:
    """``group_offload``'s text as diffusers' ``(offload_type, num_blocks_per_group)``: ``block_level:N`` or
    ``leaf_level``."""
    kind, _, blocks = text.partition(":")
    if kind == "leaf_level" and not blocks:
        return kind, None
    if kind == "block_level" and blocks.isdigit() and int(blocks) >= 1:
        return kind, int(blocks)
    raise ConfigError(f"group_offload is block_level:N (N blocks per group, N >= 1) or leaf_level, got {text!r}")


ATTENTION_PROCESSORS = ("AttnProcessor", "AttnProcessor2_0")
"""The processors ``attention_processor`` sets: diffusers' classic eager one and its SDPA one."""


def attention_processors(text: str) -> dict[str, str]:
    """``attention_processor``'s text as ``{component: processor class name}``."""
    chosen: dict[str, str] = {}
    for pair in text.split(","):
        component, sep, name = (part.strip() for part in pair.partition("="))
        if not sep or not component or name not in ATTENTION_PROCESSORS:
            raise ConfigError(
                f"attention_processor takes COMPONENT=NAME pairs, NAME one of {', '.join(ATTENTION_PROCESSORS)}; "
                f"got {pair.strip()!r}"
            )
        chosen[component] = name
    return chosen


@dataclass(kw_only=True)
class DiffusionOptions:
    """A pipeline's generation and training settings; a single model takes none of them."""

    height: int | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: image height in pixels (none given: the pipeline's default, e.g. 1024 for SDXL)",
            parse=int,
            report=as_is,
        ),
    )
    width: int | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: image width in pixels (none given: the pipeline's default)", parse=int, report=as_is
        ),
    )
    num_inference_steps: int | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: denoising steps (none given: the pipeline's default, e.g. 50 for SDXL, 28 for FLUX)",
            parse=int,
            report=as_is,
        ),
    )
    guidance_scale: float | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: classifier-free guidance scale; > 1 doubles the denoiser's batch (none given: the "
            "pipeline's default)",
            parse=float,
            report=as_is,
        ),
    )
    num_images: int = field(
        default=1,
        metadata=option(help="diffusion pipelines: images per prompt (num_images_per_prompt)", parse=int, report=as_is),
    )
    vae_tiling: bool = field(
        default=False,
        metadata=option(help="diffusion pipelines: vae.enable_tiling(), decode large latents tile by tile", report=as_is),
    )
    vae_slicing: bool = field(
        default=False,
        metadata=option(help="diffusion pipelines: vae.enable_slicing(), decode the images one at a time", report=as_is),
    )
    attention_slicing: str | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines with a UNet: pipe.enable_attention_slicing(slice_size): auto (half the heads at a "
            "time), max (one head at a time) or a slice size",
            report=as_is,
        ),
    )
    offload: str = field(
        default="no",
        metadata=option(
            help="diffusion pipelines: CPU offload as diffusers does it: model (enable_model_cpu_offload: only the running "
            "component's weights on the device), sequential (enable_sequential_cpu_offload: only the running layer's) or no",
            report=as_is,
        ),
    )
    layerwise_casting: str | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: the denoiser's enable_layerwise_casting: its weights stored in fp8_e4m3 or "
            "fp8_e5m2, each layer upcast to the pipeline's dtype while it runs (diffusers' hooks)",
            report=as_is,
        ),
    )
    group_offload: str | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: pipe.enable_group_offload as diffusers' hooks run it: block_level:N (N blocks of "
            "a component resident at a time) or leaf_level (one layer's weights); without CUDA streams",
            report=as_is,
        ),
    )
    attention_processor: str | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: a component's attention processor, COMPONENT=NAME[,COMPONENT=NAME] "
            "(component.set_attn_processor): AttnProcessor (scores materialised by baddbmm) or AttnProcessor2_0 (SDPA), "
            "e.g. unet=AttnProcessor",
            report=as_is,
        ),
    )
    vae: str | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: a VAE folder (its config.json: AutoencoderTiny or AutoencoderKL) that decodes in "
            "place of the pipeline's own, as pipe.vae = AutoencoderTiny.from_pretrained(folder) replaces it",
            report=as_is,
        ),
    )
    quantized_components: str | None = field(
        default=None,
        metadata=option(
            help="diffusion pipelines: the components --quantization quantizes, COMPONENT[,COMPONENT] "
            "(PipelineQuantizationConfig's components_to_quantize; none given: the denoiser and the T5 encoders with "
            "bitsandbytes, the denoiser with torchao)",
            report=as_is,
        ),
    )
    max_sequence_length: int | None = field(
        default=None,
        metadata=option(
            help="FLUX, SD3, PixArt, Wan and LTX pipelines: tokens the T5 prompt is padded to (none given: the pipeline's "
            "default, 512 for FLUX.1-dev and Wan, 256 for schnell and SD3, 300 for PixArt, 128 for LTX)",
            parse=int,
            report=as_is,
        ),
    )
    num_frames: int | None = field(
        default=None,
        metadata=option(
            help="video pipelines: frames to generate (none given: the pipeline's default, 81 for Wan 2.1, 161 for LTX)",
            parse=int,
            report=as_is,
        ),
    )
    cache_latents: bool = field(
        default=False,
        metadata=option(
            help="training a diffusion pipeline: the latents are cached (diffusers' scripts' --cache_latents), so the VAE is "
            "not on the device during the step",
            report=as_is,
        ),
    )
    cache_text_embeddings: bool = field(
        default=False,
        metadata=option(
            help="training a diffusion pipeline: the prompt's embeddings are precomputed and the text encoders deleted, as "
            "the DreamBooth scripts do for one instance prompt",
            report=as_is,
        ),
    )
    ema: bool = field(
        default=False,
        metadata=option(
            help="training a diffusion pipeline's whole denoiser: diffusers' EMAModel (the scripts' --use_ema) keeps an fp32 "
            "copy of the trained weights on the device and updates it after each optimizer step",
            report=as_is,
        ),
    )

    def check_diffusion(self, workload: WorkloadOptions) -> None:
        """Sizes the VAE can decode (multiples of 8, as the pipelines require), counts of at least 1."""
        for name in ("height", "width"):
            value = getattr(self, name)
            if value is not None:
                check_count(name, value, 1 << 16)
                if value % 8:
                    raise ConfigError(f"{name} must be a multiple of 8 (the VAE's downsampling), got {value}")
        for name, most in (("num_inference_steps", 10_000), ("max_sequence_length", 1 << 16), ("num_frames", 10_000)):
            if getattr(self, name) is not None:
                check_count(name, getattr(self, name), most)
        check_count("num_images", self.num_images, 1024)
        slicing = self.attention_slicing
        if slicing is not None and slicing not in ("auto", "max") and not (str(slicing).isdigit() and int(slicing) >= 1):
            raise ConfigError(f"attention_slicing is auto, max or a slice size of at least 1, got {slicing!r}")
        if self.offload not in ("no", "model", "sequential"):
            raise ConfigError(f"unknown offload {self.offload!r}; choose one of: no, model, sequential")
        self._check_weight_hooks(workload)
        if self.ema and workload.task != "train":
            raise ConfigError(f"ema averages the weights a training step updates; task='{workload.task}' trains nothing")
        if (self.cache_latents or self.cache_text_embeddings) and workload.task != "train":
            raise ConfigError(
                f"cache_latents and cache_text_embeddings shape a pipeline's training step; task='{workload.task}' trains nothing"
            )
        scale = self.guidance_scale
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale < 0):
            raise ConfigError(f"guidance_scale must be a number >= 0, got {scale!r}")

    def _check_weight_hooks(self, workload: WorkloadOptions) -> None:
        """``layerwise_casting`` names a storage dtype; ``group_offload`` a layout, and it replaces ``offload``."""
        if self.layerwise_casting is not None and self.layerwise_casting not in _LAYERWISE_CASTING:
            raise ConfigError(
                f"unknown layerwise_casting {self.layerwise_casting!r}; choose one of: {', '.join(_LAYERWISE_CASTING)}"
            )
        if self.group_offload is not None:
            group_offload_layout(self.group_offload)
            if self.offload != "no":
                raise ConfigError("group_offload and offload are two ways to offload; give one of them")
        if self.attention_processor is not None:
            attention_processors(self.attention_processor)
        if self.vae is not None and not (Path(self.vae).expanduser() / "config.json").is_file():
            raise ConfigError(f"vae={self.vae!r} is not a folder with a config.json (a VAE's, as on the Hub)")
        given = [name for name in ("layerwise_casting", "group_offload", "attention_processor", "vae") if getattr(self, name)]
        if given and workload.task != "generate":
            raise ConfigError(f"{', '.join(given)}: pipeline options of a generation; task='{workload.task}' is not one")
