"""Offline configs of real models, resolved by Hugging Face id."""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["ALIASES", "find", "find_pipeline", "model_ids", "pipeline_ids"]

# Package data sits next to this file in both editable and regular installs.
_CONFIGS = Path(__file__).resolve().parent / "configs"

ALIASES: dict[str, str] = {
    # Legacy ids the Hub still redirects after moving these models under an org.
    "gpt2": "openai-community/gpt2",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "t5-base": "google-t5/t5-base",
    "runwayml/stable-diffusion-v1-5": "stable-diffusion-v1-5/stable-diffusion-v1-5",
}


@functools.cache
def _folders() -> dict[str, Path]:
    """Map each bundled id to its folder once; a dict lookup keeps ids case-sensitive on any filesystem."""
    return {file.parent.relative_to(_CONFIGS).as_posix(): file.parent for file in _CONFIGS.glob("*/*/config.json")}


@functools.cache
def _pipelines() -> dict[str, Path]:
    """Each bundled diffusion pipeline (a ``model_index.json`` beside one folder per component)."""
    return {file.parent.relative_to(_CONFIGS).as_posix(): file.parent for file in _CONFIGS.glob("*/*/model_index.json")}


def model_ids() -> list[str]:
    """Sorted ids of every bundled model, for listings and error hints."""
    return sorted(_folders())


def pipeline_ids() -> list[str]:
    """Sorted ids of every bundled diffusion pipeline."""
    return sorted(_pipelines())


def find(model_id: str) -> Path | None:
    """The folder holding the bundled config.json of model_id (aliases resolved), or None to fall back to the Hub."""
    return _folders().get(ALIASES.get(model_id, model_id))


def find_pipeline(model_id: str) -> Path | None:
    """The folder of a bundled diffusion pipeline (aliases resolved), or None."""
    return _pipelines().get(ALIASES.get(model_id, model_id))
