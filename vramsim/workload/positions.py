"""Whether a model can run at the sequence length asked for: its position table bounds it.

A model with a learned table of absolute positions (GPT-2's ``wpe``, BERT's
``position_embeddings``, Whisper's decoder ``embed_positions``) cannot index past it: the real
run fails with an index error, while on the meta device the lookup has a shape and no values and
would trace. ``check_positions`` refuses such a run in one line. A model whose positions are
computed (rotary, ALiBi, relative buckets) runs past its configured maximum, but was not trained
there: that is a warning, naming the maximum, not a refusal. A model without a config (a custom
module) is checked by the trace itself, where its indices' bounds follow from shapes
(``tracer/data_dependent/bounds.py``).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from vramsim.errors import ConfigError

__all__ = ["check_positions", "position_limit"]

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


def _limit(model: torch.nn.Module, config: Any) -> tuple[str, int | None]:
    """The configured maximum the text positions are bounded by: the decoder's in a seq2seq model."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    if getattr(model, "main_input_name", "input_ids") != "input_ids" and not _takes_decoder_ids(model):
        return "", None
    names = ("max_position_embeddings", "max_target_positions")  # a seq2seq model's ids go to its decoder
    names = names[::-1] if _takes_decoder_ids(model) else names
    for name in names:
        value = getattr(text, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
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
