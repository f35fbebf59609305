"""Offline configs of real models, resolved by Hugging Face id.

Two tables map an id that is not bundled to one that is:

- ``ALIASES``: a legacy id the Hub still redirects to its new home; the same repository.
- ``SAME_ARCHITECTURE``: another repository whose ``config.json`` builds the same architecture at the same
  sizes (an instruct or chat fine-tune, a base/instruct twin): its memory is the bundled one's. The report says
  which config it used ("config of meta-llama/Llama-3.1-8B, same architecture").
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["ALIASES", "SAME_ARCHITECTURE", "config_of", "find", "find_pipeline", "model_ids", "pipeline_ids"]

# Package data sits next to this file in both editable and regular installs.
_CONFIGS = Path(__file__).resolve().parent / "configs"

ALIASES: dict[str, str] = {
    # Legacy ids the Hub still redirects after moving these models under an org.
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "roberta-base": "FacebookAI/roberta-base",
    "t5-small": "google-t5/t5-small",
    "t5-base": "google-t5/t5-base",
    "t5-large": "google-t5/t5-large",
    "runwayml/stable-diffusion-v1-5": "stable-diffusion-v1-5/stable-diffusion-v1-5",
}

SAME_ARCHITECTURE: dict[str, str] = {
    # Fine-tunes published with their base's config.json, sizes unchanged (tests/model_zoo/test_aliases.py
    # checks each builds its own published parameter count from the bundled config).
    "meta-llama/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b-chat-hf": "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b-chat-hf": "meta-llama/Llama-2-70b-hf",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Meta-Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B-Instruct": "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "meta-llama/Llama-4-Scout-17B-16E",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "meta-llama/Llama-4-Maverick-17B-128E",
    "google/gemma-2-2b-it": "google/gemma-2-2b",
    "google/gemma-2-9b-it": "google/gemma-2-9b",
    "google/gemma-2-27b-it": "google/gemma-2-27b",
    # Gemma 3's instruct configs are the bundled ones; the pretrained twins share them.
    "google/gemma-3-1b-pt": "google/gemma-3-1b-it",
    "google/gemma-3-4b-pt": "google/gemma-3-4b-it",
    "google/gemma-3-12b-pt": "google/gemma-3-12b-it",
    "google/gemma-3-27b-pt": "google/gemma-3-27b-it",
    "mistralai/Mistral-7B-Instruct-v0.1": "mistralai/Mistral-7B-v0.1",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "mistralai/Mistral-Nemo-Instruct-2407": "mistralai/Mistral-Nemo-Base-2407",
    "mistralai/Mistral-Small-24B-Instruct-2501": "mistralai/Mistral-Small-24B-Base-2501",
    "Qwen/Qwen2.5-0.5B-Instruct": "Qwen/Qwen2.5-0.5B",
    "Qwen/Qwen2.5-3B-Instruct": "Qwen/Qwen2.5-3B",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B",
    "Qwen/Qwen2.5-14B-Instruct": "Qwen/Qwen2.5-14B",
    "Qwen/Qwen2.5-32B-Instruct": "Qwen/Qwen2.5-32B",
    "Qwen/Qwen2.5-72B-Instruct": "Qwen/Qwen2.5-72B",
    "Qwen/Qwen3-8B-Base": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B-Base": "Qwen/Qwen3-14B",
    "Qwen/Qwen3-30B-A3B-Base": "Qwen/Qwen3-30B-A3B",
    "deepseek-ai/DeepSeek-V3-0324": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-ai/DeepSeek-V2-Lite",
    "allenai/OLMo-2-1124-7B-Instruct": "allenai/OLMo-2-1124-7B",
    "HuggingFaceTB/SmolLM2-135M-Instruct": "HuggingFaceTB/SmolLM2-135M",
    "HuggingFaceTB/SmolLM2-360M": "HuggingFaceTB/SmolLM2-360M-Instruct",
    # SmolLM2-1.7B's instruct config is the bundled one; the base shares its sizes.
    "HuggingFaceTB/SmolLM2-1.7B": "HuggingFaceTB/SmolLM2-1.7B-Instruct",
    "HuggingFaceTB/SmolLM3-3B-Base": "HuggingFaceTB/SmolLM3-3B",
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


def config_of(model_id: str) -> str | None:
    """The bundled id whose config ``model_id`` is built from when it names another repository of the same
    architecture (``SAME_ARCHITECTURE``); None for a bundled id, a legacy alias or an id not bundled."""
    return SAME_ARCHITECTURE.get(model_id)


def find(model_id: str) -> Path | None:
    """The folder holding the bundled config.json of model_id (aliases resolved), or None to fall back to the Hub."""
    resolved = ALIASES.get(model_id) or SAME_ARCHITECTURE.get(model_id) or model_id
    return _folders().get(resolved)


def find_pipeline(model_id: str) -> Path | None:
    """The folder of a bundled diffusion pipeline (aliases resolved), or None."""
    return _pipelines().get(ALIASES.get(model_id, model_id))
