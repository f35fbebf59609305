"""vLLM's multimodal budget for the profile run: which dummy images its encoder profile runs, and how many.

vLLM V1's ``GPUModelRunner.profile_run`` first runs the vision encoder (``embed_multimodal``) on a dummy batch of the
modality with the most tokens per item, the largest items its processor makes (``get_image_size_with_most_features``),
as many as ``MultiModalBudget._get_max_items`` allows (``vllm/multimodal/encoder_budget.py``); it keeps their outputs
in the encoder cache (``encoder_cache["tmp"]``) while the decoder's dummy run and the sampler's warm-up run, then clears
them. The counts, as that code computes them:

- the encoder budget is ``min(encoder_compute_budget, encoder_cache_size)``, each ``max(max_num_batched_tokens,
  max_tokens_per_mm_item)`` (``compute_mm_encoder_budget``: the scheduler's ``max_num_encoder_input_tokens`` and
  ``encoder_cache_size`` default to ``max_num_batched_tokens``);
- items per prompt: ``max(1, min(limit, max_model_len // tokens_per_item))``, the limit ``--limit-mm-per-prompt``'s
  (999 per modality when unset, ``MultiModalConfig.get_limit_per_prompt``);
- items per batch: ``max(1, min(encoder_budget // tokens_per_item, max_num_seqs x items_per_prompt))`` (chunked
  prefill on, as V1 runs it).

``--mm-processor-kwargs`` reaches the processor vLLM sizes the dummy image with (``ctx.get_hf_processor(**kwargs)``):
for Qwen2-VL and Qwen2.5-VL ``min_pixels`` and ``max_pixels`` replace the image processor's, and ``_get_vision_info``
resizes the largest image under them; for Gemma 3 ``do_pan_and_scan`` and its three ``pan_and_scan_*`` settings
replace the processor's defaults, and ``Gemma3ProcessingInfo.get_num_crops`` counts the crops of the dummy image (one
tower side wide, ``pan_and_scan_max_num_crops`` sides tall), each and the whole image ``mm_tokens_per_image`` tokens
through the tower. Other keys are refused: their effect is not modelled.

A limit of 0 for every modality the model takes serves it as a language model: no encoder profile, no tower's weights
(``Qwen2VLForConditionalGeneration.__init__`` builds ``visual = None`` and ``load_weights`` skips ``visual.``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch

from vramsim.config.serving import parse_mm_limits, parse_mm_processor_kwargs
from vramsim.errors import ConfigError, UnsupportedError

__all__ = [
    "DEFAULT_MM_LIMIT",
    "QWEN2_VL_MAX_PIXELS",
    "QWEN2_VL_MIN_PIXELS",
    "EncoderBatch",
    "encoder_batch",
    "encoder_inputs",
    "multimodal_kind",
    "tower_modules",
]

DEFAULT_MM_LIMIT = 999
"""Items per prompt of a modality ``--limit-mm-per-prompt`` does not name (V1's ``get_limit_per_prompt``)."""

QWEN2_VL_MAX_PIXELS = 12845056
"""``max_pixels`` of Qwen2-VL's and Qwen2.5-VL's image processor as the hub checkpoints save it
(``preprocessor_config.json``: 12845056 = 16384 x 28 x 28; ``min_pixels`` 3136); the configs bundled here do not carry
it. vLLM's largest Qwen image is the 9999999-pixel square ``smart_resize`` brings under it: 3584 x 3584, 16,384 tokens."""

QWEN2_VL_MIN_PIXELS = 3136
"""``min_pixels`` of the same ``preprocessor_config.json``."""

_LARGEST_SIDE = 9999999
"""The side of the picture ``Qwen2VLProcessingInfo.get_image_size_with_most_features`` resizes (``_get_vision_info``)."""

_KINDS = {"qwen2_vl": "qwen2_vl", "qwen2_5_vl": "qwen2_vl", "gemma3": "gemma3"}
"""Model types whose encoder profile is modelled -> the processor family it follows."""

_PAN_AND_SCAN_KEYS = (
    "do_pan_and_scan",
    "pan_and_scan_min_crop_size",
    "pan_and_scan_max_num_crops",
    "pan_and_scan_min_ratio_to_activate",
)
"""Gemma 3's pan-and-scan settings; the hub's ``preprocessor_config.json`` leaves them null, so the processor's
defaults (``Gemma3Processor.images_kwargs``: off, 256, 4, 1.2) hold unless ``--mm-processor-kwargs`` names them."""

_PROCESSOR_KEYS = {"qwen2_vl": ("min_pixels", "max_pixels"), "gemma3": _PAN_AND_SCAN_KEYS}
"""The ``--mm-processor-kwargs`` keys whose effect on the dummy images is modelled, per family."""

_MODALITIES = {"qwen2_vl": ("image", "video"), "gemma3": ("image",)}
"""The modalities each family's vLLM model takes (``get_supported_mm_limits``)."""

_TOWERS = ("visual", "vision_tower", "multi_modal_projector")
"""The modules vLLM builds only when a modality is allowed: Qwen's ``visual`` (its merger inside), Gemma 3's SigLIP
tower and projector."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderBatch:
    """The dummy batch vLLM's encoder profile runs: ``items`` images, each ``crops_per_item`` inputs of ``width`` x
    ``height`` to the tower."""

    modality: str
    width: int
    height: int
    tokens_per_item: int
    crops_per_item: int = 1
    """The tower's inputs per item: Gemma 3's pan-and-scan crops plus the whole image (1 without pan-and-scan)."""
    items_per_prompt: int
    items: int
    encoder_budget: int
    """Tokens: ``min(encoder_compute_budget, encoder_cache_size)``."""
    pixel_bounds: tuple[int, int] | None
    """Qwen's image processor ``(min_pixels, max_pixels)`` the largest image was resized under (None: Gemma 3's)."""


def multimodal_kind(config: Any) -> str | None:
    """The processor family of a multimodal model vLLM profiles with an encoder run, or None for a text model."""
    if getattr(config, "vision_config", None) is None:
        return None
    return _KINDS.get(getattr(config, "model_type", ""), "other")


def encoder_batch(
    name: str,
    config: Any,
    limits_text: str | None,
    *,
    tokens: int,
    seqs: int,
    max_model_len: int,
    processor_kwargs: str | None = None,
) -> EncoderBatch | None:
    """vLLM's encoder dummy batch for ``config`` (None: a text model, or every modality limited to 0)."""
    kind = multimodal_kind(config)
    limits = parse_mm_limits(limits_text)
    overrides = parse_mm_processor_kwargs(processor_kwargs)
    if kind is None:
        for flag, given in (("--limit-mm-per-prompt", limits), ("--mm-processor-kwargs", overrides)):
            if given:
                raise UnsupportedError(f"{name} takes no images: {flag} is for multimodal models")
        return None
    if kind == "other":
        if all(limits.get(m, DEFAULT_MM_LIMIT) == 0 for m in ("image", "video", "audio")):
            return None
        raise UnsupportedError(
            f"{name} ({config.model_type}): vLLM's encoder profile is modelled for Qwen2-VL, Qwen2.5-VL and Gemma 3; "
            "pass --limit-mm-per-prompt '{\"image\": 0}' to budget it as a language model"
        )
    _check_keys(name, kind, overrides)
    pixels = _pixel_bounds(overrides) if kind == "qwen2_vl" else None
    supported = _MODALITIES[kind]
    unknown = sorted(set(limits) - set(supported))
    if unknown:
        raise UnsupportedError(f"{name} takes {', '.join(supported)}, not {', '.join(unknown)} (--limit-mm-per-prompt)")
    allowed = {m: limits.get(m, DEFAULT_MM_LIMIT) for m in supported}
    if not any(allowed.values()):
        return None
    width, height, per_item, inputs = _largest_image(config, pixels, overrides)
    if allowed.get("video") and max_model_len >= 2 * per_item:
        # Qwen2VLProcessingInfo.get_num_frames_with_most_features: the video fills max_model_len with frames of the
        # largest size; at 2 x an image's tokens it holds more than one image and the video is the modality profiled
        raise UnsupportedError(
            f"{name}: at --max-model-len {max_model_len} vLLM profiles a dummy video of several frames, not modelled; "
            "pass --limit-mm-per-prompt '{\"video\": 0}' (or a --max-model-len under "
            f"{2 * per_item})"
        )
    # below that length the dummy video is one frame pair of the largest size: the same patches through the same
    # tower as one image, so the image batch stands for it (ties pick video by name, get_modality_with_max_tokens)
    limit = allowed.get("image") or allowed.get("video") or 0
    budget = max(tokens, per_item)
    per_prompt = max(1, min(limit, max_model_len // per_item))
    items = max(1, min(budget // per_item, seqs * per_prompt))
    return EncoderBatch(
        modality="image",
        width=width,
        height=height,
        tokens_per_item=per_item,
        crops_per_item=inputs,
        items_per_prompt=per_prompt,
        items=items,
        encoder_budget=budget,
        pixel_bounds=pixels,
    )


def _check_keys(name: str, kind: str, overrides: dict[str, Any]) -> None:
    """Refuses a ``--mm-processor-kwargs`` key the family's modelled processor does not take."""
    taken = _PROCESSOR_KEYS[kind]
    unknown = sorted(set(overrides) - set(taken))
    if unknown:
        raise UnsupportedError(
            f"{name}: --mm-processor-kwargs {', '.join(unknown)} not modelled ({kind} takes {', '.join(taken)})"
        )


def _pixel_bounds(overrides: dict[str, Any]) -> tuple[int, int]:
    """``(min_pixels, max_pixels)`` of Qwen's image processor after ``--mm-processor-kwargs`` (the hub's values where
    it names neither)."""
    bounds = {"min_pixels": QWEN2_VL_MIN_PIXELS, "max_pixels": QWEN2_VL_MAX_PIXELS}
    for key, value in overrides.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"mm_processor_kwargs: {key}={value!r} is not a positive number of pixels")
        bounds[key] = value
    if bounds["min_pixels"] > bounds["max_pixels"]:
        raise ConfigError(f"mm_processor_kwargs: min_pixels {bounds['min_pixels']} is over max_pixels {bounds['max_pixels']}")
    return bounds["min_pixels"], bounds["max_pixels"]


def _pan_and_scan(overrides: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3's pan-and-scan settings: the processor's defaults as transformers states them, replaced by
    ``--mm-processor-kwargs`` (vLLM merges them over the defaults, ``ctx.get_merged_mm_kwargs``)."""
    from transformers.models.gemma3.processing_gemma3 import Gemma3Processor

    defaults = cast(dict[str, Any], Gemma3Processor.images_kwargs)  # a TypedDict of every image option
    settings = {key: defaults[key] for key in _PAN_AND_SCAN_KEYS}
    for key, value in overrides.items():
        if key == "do_pan_and_scan":
            if not isinstance(value, bool):
                raise ConfigError(f"mm_processor_kwargs: do_pan_and_scan={value!r} is not true or false")
        elif key == "pan_and_scan_min_ratio_to_activate":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"mm_processor_kwargs: {key}={value!r} is not a positive ratio")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"mm_processor_kwargs: {key}={value!r} is not a positive whole number")
        settings[key] = value
    return settings


def _gemma3_crops(width: int, height: int, settings: dict[str, Any]) -> int:
    """Pan-and-scan's crops of a ``width`` x ``height`` image, as ``Gemma3ProcessingInfo.get_num_crops`` (after
    ``Gemma3ImageProcessor.pan_and_scan``) counts them: 0 when off, for a near-square image, or for crops under the
    minimum size."""
    if not settings["do_pan_and_scan"]:
        return 0
    least, most, ratio = (
        settings["pan_and_scan_min_crop_size"],
        settings["pan_and_scan_max_num_crops"],
        settings["pan_and_scan_min_ratio_to_activate"],
    )
    long, short = max(width, height), min(width, height)
    if long / short < ratio:
        return 0
    along = min(max(2, min(long // least, math.floor(long / short + 0.5))), most)
    if min(math.ceil(long / along), short) < least:
        return 0
    return along


def _largest_image(config: Any, pixels: tuple[int, int] | None, overrides: dict[str, Any]) -> tuple[int, int, int, int]:
    """``(width, height, tokens, inputs)`` of the image with the most features, as vLLM's processing info finds it: the
    size each of its ``inputs`` reaches the tower at (Qwen's under ``pixels``, its processor's ``(min_pixels,
    max_pixels)``; None for Gemma 3, cut by pan-and-scan's ``overrides``)."""
    vision = config.vision_config
    if pixels is not None:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        merge = int(vision.spatial_merge_size)
        height, width = smart_resize(
            _LARGEST_SIDE,
            _LARGEST_SIDE,
            factor=int(vision.patch_size) * merge,
            min_pixels=pixels[0],
            max_pixels=pixels[1],
        )
        return width, height, (height // vision.patch_size) * (width // vision.patch_size) // merge**2, 1
    # Gemma3ProcessingInfo.get_image_size_with_most_features: one tower side wide, max_num_crops sides tall; its crops
    # and the whole image are each resized to the tower's side, mm_tokens_per_image tokens apiece (get_num_image_tokens)
    settings = _pan_and_scan(overrides)
    side = int(vision.image_size)
    inputs = _gemma3_crops(side, side * settings["pan_and_scan_max_num_crops"], settings) + 1
    return side, side, inputs * int(config.mm_tokens_per_image), inputs


def encoder_inputs(config: Any, batch: EncoderBatch, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """``get_image_features``' keywords for the dummy batch, on the current default device (the patch grid on the CPU,
    for the tracer to read)."""
    from vramsim.tracer.data_dependent import seed

    vision = config.vision_config
    if multimodal_kind(config) == "qwen2_vl":
        patch, temporal = int(vision.patch_size), int(vision.temporal_patch_size)
        grid = [1, batch.height // patch, batch.width // patch]
        patches = batch.items * grid[1] * grid[2]
        width = int(getattr(vision, "in_channels", 3)) * temporal * patch * patch
        thw = torch.tensor([grid] * batch.items, dtype=torch.long, device="cpu")
        return {"pixel_values": torch.zeros(patches, width, dtype=dtype), "image_grid_thw": seed(thw, "meta")}
    channels = int(getattr(vision, "num_channels", 3))
    images = batch.items * batch.crops_per_item  # vLLM's pixel_values: every item's crops, flat
    return {"pixel_values": torch.zeros(images, channels, batch.height, batch.width, dtype=dtype)}


def tower_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The encoder's modules vLLM does not build when no modality is allowed."""
    inner = getattr(model, "model", model)
    return [module for attr in _TOWERS if isinstance(module := getattr(inner, attr, None), torch.nn.Module)]
