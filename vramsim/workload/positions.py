"""Whether a model can run at the sequence length asked for: its position table bounds it.

A model with a learned table of absolute positions (GPT-2's ``wpe``, BERT's
``position_embeddings``, Whisper's decoder ``embed_positions``) cannot index past it: the real
run fails with an index error, while on the meta device the lookup has a shape and no values and
would trace. ``check_positions`` refuses such a run in one line. A model whose positions are
computed (rotary, ALiBi, relative buckets) runs past its configured maximum, but was not trained
there: that is a warning, naming the maximum, not a refusal. A model without a config (a custom
module) is checked by the trace itself, where its indices' bounds follow from shapes
(``tracer/data_dependent/bounds.py``). Where no length is given, a learned table shorter than
``DEFAULT_SEQ_LEN`` sets the default (``default_seq_len``), so CLIP answers at its 77 tokens.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeGuard

import torch

from vramsim.config.workload import DEFAULT_SEQ_LEN
from vramsim.errors import ConfigError

__all__ = ["check_positions", "default_seq_len", "position_limit", "short_positions"]

_POSITION_FIELDS = ("max_position_embeddings", "max_target_positions")
"""Config fields bounding the text positions; a seq2seq model's ids go to its decoder (``max_target_positions``)."""

_TABLE_OFFSET = 2
"""Extra rows some tables carry beyond the configured maximum (OPT and BART start positions at 2)."""


def check_positions(model: torch.nn.Module, *, seq_len: int, new_tokens: int) -> str | None:
    """Raise ``ConfigError`` when ``seq_len + new_tokens`` positions overflow a learned position
    table; return a warning when they pass a computed one's configured maximum; else None."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    field, limit = _limit(model, config)
    needed = seq_len + new_tokens
    if limit is None or needed <= limit:
        return None
    asked = f"seq_len {seq_len}" + (f" + max_new_tokens {new_tokens} = {needed} positions" if new_tokens else "")
    table = _learned_table(model, limit)
    if table is not None:
        raise ConfigError(
            f"{asked} overflows the {limit} positions {type(model).__name__} learns ({field}; {table}): the real run "
            f"fails with an index error; use a seq_len of at most {limit - new_tokens}"
        )
    return (
        f"{asked} passes {field}={limit}: the positions are computed (rotary or relative), so it runs, "
        "but the model was not trained that long"
    )


def position_limit(model: torch.nn.Module) -> tuple[str, int] | None:
    """The config field bounding the text positions and its value (None: no such bound), as
    ``check_positions`` reads it: the longest sequence a search of lengths may try."""
    config = getattr(model, "config", None)
    field, limit = _limit(model, config) if config is not None else ("", None)
    return None if limit is None else (field, limit)


def default_seq_len(model: torch.nn.Module, *, new_tokens: int) -> int:
    """The length a run takes when none is given: ``DEFAULT_SEQ_LEN``, or what a shorter learned position table
    holds less the ``new_tokens`` decoded after it (computed positions run past their maximum: a warning)."""
    config = getattr(model, "config", None)
    if config is None:
        return DEFAULT_SEQ_LEN
    _, limit = _limit(model, config)
    if limit is None or DEFAULT_SEQ_LEN + new_tokens <= limit or _learned_table(model, limit) is None:
        return DEFAULT_SEQ_LEN
    return limit - new_tokens if limit > new_tokens else DEFAULT_SEQ_LEN  # no room at all: check_positions says so


def short_positions(config: Any, *, new_tokens: int) -> bool:
    """Whether ``config`` bounds its text positions below ``DEFAULT_SEQ_LEN + new_tokens``: read from the config
    alone, so that only such a model is built to find whether its table is learned (``default_seq_len``)."""
    text = _text_config(config)
    bounds = (getattr(text, name, None) for name in _POSITION_FIELDS)
    return any(_bound(value) and value < DEFAULT_SEQ_LEN + new_tokens for value in bounds)


def _text_config(config: Any) -> Any:
    """The config holding the text positions: a composite model's decoder's (CLIP's text, Whisper's decoder)."""
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def _bound(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _limit(model: torch.nn.Module, config: Any) -> tuple[str, int | None]:
    """The configured maximum the text positions are bounded by: the decoder's in a seq2seq model."""
    text = _text_config(config)
    if getattr(model, "main_input_name", "input_ids") != "input_ids" and not _takes_decoder_ids(model):
        return "", None
    names = _POSITION_FIELDS[::-1] if _takes_decoder_ids(model) else _POSITION_FIELDS
    for name in names:
        value = getattr(text, name, None)
        if _bound(value):
            return name, value
    return "", None


def _takes_decoder_ids(model: torch.nn.Module) -> bool:
    return "decoder_input_ids" in inspect.signature(model.forward).parameters


def _learned_table(model: torch.nn.Module, limit: int) -> str | None:
    """The module path of an embedding of positions sized by ``limit``, if the model has one."""
    for path, module in model.named_modules():
        leaf = path.rsplit(".", 1)[-1].lower()
        if not isinstance(module, torch.nn.Embedding) or not ("pos" in leaf or leaf == "wpe"):
            continue
        if limit <= module.num_embeddings <= limit + _TABLE_OFFSET:
            return path
    return None
