"""Refuse model configs that are absurd before anything is built from them.

A model on the meta device holds no memory, but its modules are Python objects: a config with a
million layers would take hours and gigabytes of host memory to build and trace. ``check_config``
reads the sizes a config declares (in it and in its sub-configs) and refuses, with a
``ConfigError``, one whose sizes are not positive integers, whose layer count exceeds
``MAX_LAYERS`` or whose estimated parameter count exceeds ``MAX_PARAMETERS``.

The estimate is deliberately rough (embeddings plus, per layer, attention ``4 h^2`` and a gated
MLP ``3 h i`` times the experts): it only has to tell a real model from a typo.
"""

from __future__ import annotations

from typing import Any

from vramsim.errors import ConfigError

__all__ = ["MAX_LAYERS", "MAX_PARAMETERS", "check_config", "estimated_parameters"]

MAX_LAYERS = 4096
"""Most layers (summed over a config's stacks) accepted; published models have at most a few hundred."""
MAX_PARAMETERS = 10**14
"""Largest estimated parameter count accepted (100T; published models reach about 2T)."""

_LAYERS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
    "num_decoder_layers",
)
_HIDDEN = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim")
_INTERMEDIATE = ("intermediate_size", "ffn_dim", "d_ff", "n_inner", "encoder_ffn_dim", "moe_intermediate_size")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_VOCAB = ("vocab_size",)
_HEADS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", "decoder_attention_heads")
_SIZES = (*_LAYERS, *_HIDDEN, *_INTERMEDIATE, *_EXPERTS, *_VOCAB, *_HEADS, "max_position_embeddings", "num_key_value_heads")


def check_config(config: Any) -> None:
    """Raise ``ConfigError`` if ``config`` (a ``PretrainedConfig``) declares absurd sizes."""
    layers = 0
    for path, sub in _configs(config):
        where = f"{path}." if path else ""
        attrs = vars(sub)
        for key in _SIZES:
            value = attrs.get(key)
            if value is None:
                continue
            # Per-stage or per-layer sizes come as lists (CvT, Swin, Gemma 3n); some configs
            # write whole numbers as floats (1200.0).
            for item in value if isinstance(value, (list, tuple)) else (value,):
                _check_size(f"{where}{key}", key, item)
        layers += sum(attrs[k] for k in _LAYERS if isinstance(attrs.get(k), int) and not isinstance(attrs.get(k), bool))
    if layers > MAX_LAYERS:
        raise ConfigError(f"the config declares {layers} layers; vramsim refuses more than {MAX_LAYERS} (a typo?)")
    params = estimated_parameters(config)
    if params > MAX_PARAMETERS:
        raise ConfigError(
            f"the config declares about {params:.2e} parameters; vramsim refuses more than {MAX_PARAMETERS:.0e} (a typo?)"
        )


def _check_size(name: str, key: str, value: Any) -> None:
    whole = isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not (isinstance(value, int) or whole):
        raise ConfigError(f"config field {name} must be an integer, got {value!r}")
    allow_zero = key in (*_EXPERTS, *_INTERMEDIATE, *_LAYERS, "num_key_value_heads")
    if value < 0 or (value == 0 and not allow_zero):
        sign = "must not be negative" if allow_zero else "must be positive"
        raise ConfigError(f"config field {name} {sign}, got {value}")


def estimated_parameters(config: Any) -> int:
    """A rough parameter count from the sizes a config declares (see the module docstring)."""
    total = 0
    for _, sub in _configs(config):
        attrs = vars(sub)
        hidden = _int(attrs, _HIDDEN)
        if not hidden:
            continue
        inner = _int(attrs, _INTERMEDIATE) or 4 * hidden
        experts = max(_int(attrs, _EXPERTS), 1)
        layers = sum(_int(attrs, (k,)) for k in _LAYERS)
        total += _int(attrs, _VOCAB) * hidden + layers * (4 * hidden * hidden + 3 * hidden * inner * experts)
    return total


def _configs(config: Any, path: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """``config`` and its nested sub-configs, with their dotted paths."""
    if depth > 4 or not hasattr(config, "__dict__"):
        return []
    found = [(path, config)]
    for key, value in vars(config).items():
        if type(value).__name__.endswith("Config") and hasattr(value, "to_dict"):
            found += _configs(value, f"{path}.{key}" if path else key, depth + 1)
    return found


def _int(attrs: dict[str, Any], names: tuple[str, ...]) -> int:
    for name in names:
        value = attrs.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            return max(value)
    return 0
