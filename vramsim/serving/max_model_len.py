"""The longest request an engine accepts for a model, read from its config as the engine reads it.

vLLM (``_get_and_verify_max_len``, ``vllm/config/model.py``) takes the smallest of the config's
length keys (``max_position_embeddings``, GPT-2's ``n_positions``, ``max_seq_len``, ...), or its
``model_max_length`` when set, times the RoPE scaling factor of every rope type but ``llama3``,
``longrope`` and ``su`` (whose positions already count it; a ``yarn`` factor multiplies
``original_max_position_embeddings``); Gemma-3's length is taken as scaled already. With no key
it assumes 2,048 tokens. SGLang (``get_context_length``, ``sglang/srt/configs/model_config.py``)
takes the first key of its own order, times the factor unless the rope type is ``llama3`` or the
scaling names ``original_max_position_embeddings``. Both refuse a longer ``--max-model-len``
(``--context-length``) at start-up unless an environment variable allows it. The tokenizer's
``model_max_length``, which vLLM also caps the length by, is not read: only configs are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformers import PretrainedConfig

from vramsim.config.serving import ServeConfig
from vramsim.errors import EngineRefusedError

__all__ = ["DerivedLength", "derived_length", "resolve_max_model_len"]

VLLM_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
"""vLLM's ``possible_keys``, in its order: the smallest value wins, the first key on a tie."""
SGLANG_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
"""SGLang's ``CONTEXT_LENGTH_KEYS``: the first key present wins."""
DEFAULT_LENGTH = 2048
"""What both engines assume when the config has none of their keys."""
UNSCALED_ROPE_TYPES = ("llama3", "longrope", "su")
"""vLLM's rope types whose ``max_position_embeddings`` already counts the scaling."""
ALLOW_LONGER = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}
"""The environment variable that lets each engine start with a longer length than the config's."""


@dataclass(frozen=True, slots=True)
class DerivedLength:
    """The model's length as an engine derives it, and where it comes from."""

    tokens: int
    key: str
    """The config key it was read from (``"default"`` when the config has none)."""
    factor: float = 1.0
    """The RoPE scaling factor it was multiplied by."""


def derived_length(config: PretrainedConfig, engine: str) -> DerivedLength:
    """The longest request ``engine`` serves ``config`` at, as it derives it from the (text) config."""
    text = getattr(config, "text_config", None) or config
    return _vllm_length(text) if engine == "vllm" else _sglang_length(text)


def resolve_max_model_len(name: str, config: PretrainedConfig, options: ServeConfig) -> int:
    """``--max-model-len``, or the model's derived length when it is left out (both engines'
    default); a longer one is refused as the engine refuses it, unless ``allow_long_max_model_len``."""
    derived = derived_length(config, options.engine)
    wanted = options.max_model_len
    if wanted is None:
        return derived.tokens
    if wanted > derived.tokens and not options.allow_long_max_model_len:
        engine = "vLLM" if options.engine == "vllm" else "SGLang"
        scaled = f" x rope factor {derived.factor:g}" if derived.factor != 1 else ""
        raise EngineRefusedError(
            f"max_model_len={wanted} exceeds {name}'s {derived.tokens:,} positions ({derived.key}{scaled}); "
            f"{engine} refuses it at start-up (positions past them give NaN with RoPE, out-of-bounds reads "
            f"with absolute positions): pass max_model_len={derived.tokens} or less, or "
            f"allow_long_max_model_len as {ALLOW_LONGER[options.engine]} does"
        )
    return wanted


def _vllm_length(text: PretrainedConfig) -> DerivedLength:
    """vLLM's derived ``max_model_len``: the smallest length key (``model_max_length`` first when set), scaled."""
    found = [(value, key) for key in VLLM_LENGTH_KEYS if isinstance(value := getattr(text, key, None), (int, float))]
    tokens, key = min(found, key=lambda item: item[0]) if found else (DEFAULT_LENGTH, "default")
    if isinstance(limit := getattr(text, "model_max_length", None), int) and limit:
        tokens, key = limit, "model_max_length"
    factor = 1.0
    ropes = _rope_parameters(text)
    if ropes and "gemma3" not in str(getattr(text, "model_type", "")):
        for rope in ropes:
            kind = rope.get("rope_type", rope.get("type", "default"))
            if kind in UNSCALED_ROPE_TYPES:
                continue
            factor = float(rope.get("factor", factor))
            if kind == "yarn":
                tokens = rope.get("original_max_position_embeddings", tokens)
                key = "original_max_position_embeddings"
    return DerivedLength(tokens=int(tokens * factor), key=key, factor=factor)


def _sglang_length(text: PretrainedConfig) -> DerivedLength:
    """SGLang's derived ``context_len``: the first length key of its order, scaled."""
    rope = getattr(text, "rope_scaling", None) or {}
    factor = float(rope.get("factor", 1))
    if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
        factor = 1.0
    for key in SGLANG_LENGTH_KEYS:
        value = getattr(text, key, None)
        if isinstance(value, (int, float)):
            return DerivedLength(tokens=int(factor * value), key=key, factor=factor)
    return DerivedLength(tokens=DEFAULT_LENGTH, key="default")


def _rope_parameters(text: PretrainedConfig) -> list[dict[str, Any]]:
    """The config's RoPE parameters, one dict per layer type (transformers 5 keys them by layer type
    where they differ, as Gemma-3's full and sliding layers)."""
    ropes = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None)
    if not isinstance(ropes, dict):
        return []
    if all(isinstance(value, dict) for value in ropes.values()):
        return list(ropes.values())
    return [ropes]
