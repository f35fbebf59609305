"""What ``vramsim models`` lists, read from the bundled files alone (no torch): each id with its family, its
published parameter count and whether its head decodes tokens."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass

from vramsim.model_zoo import find, find_pipeline, model_ids, pipeline_ids
from vramsim.model_zoo.published import PIPELINES, PUBLISHED

__all__ = ["Entry", "matches", "model_entries", "pipeline_entries"]

_GENERATIVE_HEADS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
"""Heads whose names say they decode tokens (causal, seq2seq, speech and image-text LMs); an encoder's head
(``BertForMaskedLM``, ``ViTForImageClassification``) does not, and ``--task generate`` refuses it."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One bundled id as the listing shows it."""

    model_id: str
    family: str
    """config.json's ``model_type``; for a pipeline, model_index.json's ``_class_name``."""
    parameters: int | str | None
    """The published count (exact, or the rounded figure where only that is published), which
    tests/model_zoo/test_parameter_counts.py checks the config builds; for a pipeline, its denoiser's (``unet`` or
    ``transformer``, tests/model_zoo/test_pipeline_parameter_counts.py); None where none is recorded."""
    generates: bool
    """Its head decodes tokens, so ``--task generate`` applies (a pipeline: its ``__call__``)."""


def matches(model_id: str, pattern: str | None) -> bool:
    """``pattern`` in ``model_id``, ignoring case; with ``*``, ``?`` or ``[``, a glob over the whole id or over the
    name after its organisation (``qwen3*`` matches ``Qwen/Qwen3-8B``)."""
    if not pattern:
        return True
    text, wanted = model_id.lower(), pattern.lower()
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(text, wanted) or fnmatch.fnmatchcase(text.rpartition("/")[2], wanted)
    return wanted in text


def model_entries(pattern: str | None = None) -> list[Entry]:
    """The bundled models whose ids match ``pattern``, sorted by id."""
    published = {case.model_id: case.count for case in PUBLISHED}
    entries = []
    for model_id in model_ids():
        if not matches(model_id, pattern):
            continue
        folder = find(model_id)
        assert folder is not None, "a listed id has its folder"
        config = json.loads((folder / "config.json").read_text())
        heads = config.get("architectures") or [""]
        entries.append(
            Entry(
                model_id=model_id,
                family=config["model_type"],
                parameters=published.get(model_id),
                generates=heads[0].endswith(_GENERATIVE_HEADS),
            )
        )
    return entries


def pipeline_entries(pattern: str | None = None) -> list[Entry]:
    """The bundled diffusion pipelines whose ids match ``pattern``, sorted by id."""
    entries = []
    for pipeline_id in pipeline_ids():
        if not matches(pipeline_id, pattern):
            continue
        folder = find_pipeline(pipeline_id)
        assert folder is not None, "a listed id has its folder"
        index = json.loads((folder / "model_index.json").read_text())
        denoiser = "transformer" if isinstance(index.get("transformer"), list) else "unet"
        parameters = PIPELINES.get(pipeline_id, {}).get(denoiser)
        entries.append(Entry(model_id=pipeline_id, family=index.get("_class_name", ""), parameters=parameters, generates=True))
    return entries
