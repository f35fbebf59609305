"""What a model's config and its feature extractor say about its audio frames: the bins, the hop
between encoder frames, the frame stacking, and the extractor itself, for the synthesised inputs."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["AUDIO_HOP", "conv_hop", "feature_extractor", "frame_layout", "mel_bins", "silence"]

AUDIO_HOP = 320
"""Waveform samples per encoder frame when a model names none (wav2vec2's conv strides: 5*2**6)."""


def mel_bins(config: Any, default: Any = 80) -> Any:
    """Feature bins the audio encoder expects: in the config or its encoder / audio sub-config."""
    names = ("feature_projection_input_dim", "num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels", "input_dim")
    nested = (getattr(config, name, None) for name in ("encoder_config", "audio_config", "encoder"))
    for source in (config, *nested):
        if source is not None:
            for name in names:
                value = getattr(source, name, None)
                if isinstance(value, int) and value > 0:
                    return value
    return default


def conv_hop(config: Any) -> int:
    """Waveform samples per encoder frame of a raw-audio encoder: the product of its conv strides."""
    strides = getattr(config, "conv_stride", None)
    if isinstance(strides, (list, tuple)) and strides and all(isinstance(s, int) for s in strides):
        hop = 1
        for stride in strides:
            hop *= stride
        return hop
    return AUDIO_HOP


def _extractor_class(config: Any) -> Any:
    """The model type's feature extractor class, if it has one. Where its backend (torchaudio,
    librosa) is missing, transformers exports a placeholder; the class itself is read from its module."""
    import importlib

    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    name = FEATURE_EXTRACTOR_MAPPING_NAMES.get(getattr(config, "model_type", ""))
    if not isinstance(name, str):
        return None
    cls = getattr(transformers, name, None)
    if cls is not None and getattr(cls, "is_dummy", False):
        cls = getattr(importlib.import_module(cls.__module__), name, None)
    return cls


def frame_layout(config: Any) -> tuple[int, int]:
    """``(frame_stacking, delta_expansion)`` that the feature extractor states: consecutive mel
    frames stacked into one encoder frame, each with its deltas (Granite Speech 5: 2 and 2)."""
    try:
        cls = _extractor_class(config)
    except Exception:  # an extractor module that does not import states no layout
        return 1, 1
    layout = (getattr(cls, "frame_stacking", 1), getattr(cls, "delta_expansion", 1))
    return tuple(v if isinstance(v, int) and v > 0 else 1 for v in layout)  # type: ignore[return-value]


def feature_extractor(config: Any) -> Any:
    """The model type's feature extractor with its defaults (processor defaults), if it has one."""
    try:
        cls = _extractor_class(config)
        if cls is None:
            return None
        kwargs: dict[str, Any] = {}
        bins = mel_bins(config, default=None)
        accepted = inspect.signature(cls.__init__).parameters
        if bins and "feature_size" in accepted:
            kwargs["feature_size"] = bins
        return cls(**kwargs)
    except Exception:
        return None


def silence(samples: int) -> Any:
    """``samples`` of silent waveform, what the feature extractor is run on (the values never matter)."""
    import numpy as np

    return np.zeros(max(samples, 1), dtype=np.float32)
