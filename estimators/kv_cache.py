"""KV cache per layer, read from the cache a traced prefill and decode really built.

The torch side (``vramsim/serving/probes.py``) runs the model's own cache at three prompt lengths and
records, per cache layer, the shapes and dtypes of its tensors (``CacheSample``). This module
turns those samples into bytes per token per layer (``LayerCache``) by difference, so nothing
is derived from a formula over the config:

- ``full``: bytes grow with every token (``(batch, kv_heads, tokens, head_dim)`` keys and values).
- ``sliding``: bytes grow, then stop at the window the layer keeps (Mistral, Gemma-2's
  alternate layers); ``window`` is the measured number of tokens kept.
- ``state``: bytes that do not grow (a Mamba / linear-attention layer's conv and recurrent state).
- ``cross``: an encoder-decoder's cross-attention cache, which grows with the *encoder* length.
- ``latent``: an MLA layer (DeepSeek-V2/V3) as serving engines store it: the compressed latent
  and the shared rope key the model's ``kv_a_proj_with_mqa`` produces, one vector per token, in
  place of the decompressed per-head keys and values transformers caches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CacheSample", "CacheTensor", "LayerCache", "LayerKind", "layers_from_samples"]

LayerKind = Literal["full", "sliding", "state", "cross", "latent"]

_FLOATING = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8")
"""Element types of cached data; integer bookkeeping (a sliding layer's window length) is not cache data."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTensor:
    """One tensor a cache layer holds."""

    shape: tuple[int, ...]
    dtype: str
    """torch's name without ``torch.`` (``bfloat16``)."""
    nbytes: int
    """numel x element size: the tensor's own bytes, whatever storage it views."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSample:
    """One cache layer after a prefill of ``tokens - 1`` tokens and one decode step."""

    layer: int
    cross: bool
    """Whether it is an encoder-decoder's cross-attention cache layer."""
    cache_class: str
    """The transformers cache layer class (``DynamicLayer``, ``DynamicSlidingWindowLayer``, ...)."""
    tokens: int
    """Tokens the decoder has seen: prompt plus the decoded one (the encoder's for a cross layer)."""
    tensors: tuple[CacheTensor, ...]
    latent_width: int | None = None
    """Elements per token of an MLA layer's compressed latent (``kv_a_proj_with_mqa``'s output); else None."""
    conv_column_elements: int = 0
    """A recurrent layer's convolution state: the elements of one of its ``conv_kernel`` time columns
    (``(batch, conv_dim, conv_kernel)`` conv states in transformers' cache); 0 for other layers."""

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors if t.dtype in _FLOATING)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCache:
    """What one layer caches per sequence, measured."""

    layer: int
    kind: LayerKind
    cache_class: str
    bytes_per_token: int
    """Bytes per token per sequence in the cache's own dtype (for ``latent``: the latent's; for
    ``cross``: per encoder token)."""
    element_bytes: int
    """Bytes of one cached element in the model's cache dtype."""
    window: int | None
    """Tokens a ``sliding`` layer keeps (measured); None otherwise."""
    state_bytes: int
    """Bytes per sequence that do not grow with tokens (recurrent state)."""
    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    """Shapes of its tensors after the longest probe."""
    model_bytes_per_token: int
    """Bytes per token the transformers cache itself holds (differs from ``bytes_per_token`` for MLA)."""
    state_elements: int = 0
    """A ``state`` layer's state in elements (transformers may keep its SSM state in float32)."""
    conv_column_elements: int = 0
    """A ``state`` layer's convolution state, one time column of it (see ``engine_state_bytes``)."""
    encoder_tokens: int = 0
    """The encoder tokens a ``cross`` layer holds (Whisper: 1500); 0 for other layers."""

    def engine_state_bytes(self, element_bytes: int) -> int:
        """A ``state`` layer's state as vLLM stores it, in elements of ``element_bytes``: the shapes
        of the traced state, less one convolution column (transformers keeps ``conv_kernel`` columns,
        vLLM ``conv_kernel - 1``: ``MambaStateShapeCalculator`` in
        ``vllm/model_executor/layers/mamba/mamba_utils.py``), every tensor in one dtype (vLLM's
        ``mamba_cache_dtype`` and ``mamba_ssm_cache_dtype`` default to the model's)."""
        return (self.state_elements - self.conv_column_elements) * element_bytes

    def bytes_per_token_as(self, element_bytes: int | None) -> int:
        """Bytes per token with the cache stored in elements of ``element_bytes`` (None: as traced)."""
        if element_bytes is None or self.kind == "state":
            return self.bytes_per_token
        return self.bytes_per_token // self.element_bytes * element_bytes


def layers_from_samples(samples: list[CacheSample]) -> list[LayerCache]:
    """One ``LayerCache`` per cache layer from samples at three or more token counts.

    Growth between the two shortest probes gives bytes per token; a longest probe that holds
    less than that growth predicts gives the window the layer keeps.
    """
    by_layer: dict[tuple[bool, int], list[CacheSample]] = {}
    for sample in samples:
        by_layer.setdefault((sample.cross, sample.layer), []).append(sample)
    return [_layer(sorted(found, key=lambda s: s.tokens)) for _, found in sorted(by_layer.items())]


def _layer(samples: list[CacheSample]) -> LayerCache:
    if samples[0].cross:
        return _cross_layer(samples[-1])
    if len({s.tokens for s in samples}) < 3:
        raise ValueError(f"layer {samples[0].layer}: need samples at three token counts, got {len(samples)}")
    first, second, last = samples[0], samples[1], samples[-1]
    growth = second.nbytes - first.nbytes
    steps = second.tokens - first.tokens
    if growth % steps:
        raise ValueError(f"layer {first.layer}: cache grew {growth} B over {steps} tokens, not a whole number per token")
    per_token = growth // steps
    fixed = first.nbytes - per_token * first.tokens
    data = [t for t in last.tensors if t.dtype in _FLOATING]
    element = min((t.nbytes // max(_numel(t.shape), 1) for t in data if _numel(t.shape)), default=0)
    window = None
    if per_token and last.nbytes < fixed + per_token * last.tokens:
        window = (last.nbytes - fixed) // per_token
    kind: LayerKind = "cross" if first.cross else "full"
    if first.latent_width is not None:
        kind = "latent"
    elif per_token == 0:
        kind = "state"
    elif window is not None:
        kind = "sliding"
    serving = first.latent_width * element if kind == "latent" and first.latent_width is not None else per_token
    return LayerCache(
        layer=first.layer,
        kind=kind,
        cache_class=first.cache_class,
        bytes_per_token=serving,
        element_bytes=element,
        window=window,
        state_bytes=fixed if kind == "state" else 0,
        dtype=data[0].dtype if data else "",
        shapes=tuple(t.shape for t in last.tensors),
        model_bytes_per_token=per_token,
        state_elements=sum(_numel(t.shape) for t in data) if kind == "state" else 0,
        conv_column_elements=last.conv_column_elements if kind == "state" else 0,
    )


def _cross_layer(sample: CacheSample) -> LayerCache:
    """A cross-attention layer holds the encoder's tokens, however many the decoder has seen."""
    if not sample.tokens or sample.nbytes % sample.tokens:
        raise ValueError(f"cross layer {sample.layer}: {sample.nbytes} B is not a whole number per encoder token")
    data = [t for t in sample.tensors if t.dtype in _FLOATING]
    element = min((t.nbytes // max(_numel(t.shape), 1) for t in data if _numel(t.shape)), default=0)
    per_token = sample.nbytes // sample.tokens
    return LayerCache(
        layer=sample.layer,
        kind="cross",
        cache_class=sample.cache_class,
        bytes_per_token=per_token,
        element_bytes=element,
        window=None,
        state_bytes=0,
        dtype=data[0].dtype if data else "",
        shapes=tuple(t.shape for t in sample.tensors),
        model_bytes_per_token=per_token,
        encoder_tokens=sample.tokens,
    )


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count
