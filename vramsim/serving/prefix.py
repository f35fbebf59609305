"""Prefix caching and the concurrency line: how many requests fit when they share a prefix.

Prefix caching moves no memory: vLLM's KV budget is the same with it on or off (``--enable-prefix-caching``, on by
default on the V1 engine). What changes is how many requests the blocks hold: a request whose first tokens are a
cached prefix points at the prefix's blocks instead of filling its own (``KVCacheManager.get_computed_blocks``), so
with every request starting with the same ``--shared-prefix-len`` tokens (a system prompt, a few-shot preamble)
the prefix's full blocks are held once. vLLM's own "Maximum concurrency" line counts none of that; the report
prints it as vLLM does and the shared-prefix figure beside it (``estimators/serving.py`` ``shared_prefix_blocks``).
"""

from __future__ import annotations

from vramsim.config.serving import ServeConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators import serving
from vramsim.results.serving import ServePrefix, ServeReport

__all__ = ["shared_prefix"]


def shared_prefix(config: ServeConfig, report: ServeReport) -> ServePrefix | None:
    """The concurrency of ``report``'s deployment when every request starts with ``config.shared_prefix_len``
    tokens (None without one); what the closed form does not cover is refused in one line."""
    prefix = config.shared_prefix_len
    if not prefix:
        return None
    if config.no_enable_prefix_caching:
        raise ConfigError(
            "shared_prefix_len needs prefix caching: without it no block is shared (drop --no-enable-prefix-caching)"
        )
    if prefix >= report.max_model_len:
        raise ConfigError(f"shared_prefix_len ({prefix}) must be shorter than max_model_len ({report.max_model_len})")
    if any(layer.kind not in ("full", "latent") for layer in report.layers):
        raise UnsupportedError(
            f"{report.model}: a shared prefix is modelled for models whose every layer keeps every token; sliding "
            "windows, recurrent state and cross-attention cache blocks otherwise"
        )
    shared, own, concurrency = serving.shared_prefix_blocks(prefix, report.max_model_len, report.block_size, report.kv_blocks)
    return ServePrefix(tokens=prefix, shared_blocks=shared, request_blocks=own, max_concurrency=concurrency)
