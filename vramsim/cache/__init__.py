"""The result cache: an answer stored on disk under the key of its request, so the same question is traced once.

Two parts, for any command that answers from a trace (``simulate``, and later a ``plan`` quote):

- ``request_key(kind, model, options, **parts) -> str | None``: the SHA-256 of the canonical request
  (``keys.py`` lists what goes in: the model's content, every option folded into ``SimulationConfig``, each part,
  where a ``Path`` stands for its file's content, and the versions of vramsim and of the libraries that trace);
  ``None`` where the request cannot be written out exactly (a model object, a lambda), which is then traced.
- ``ResultCache``: ``ResultCache.default()`` is ``$XDG_CACHE_HOME/vramsim`` (``~/.cache/vramsim``; ``None`` with
  ``VRAMSIM_NO_CACHE`` set); ``get(key, kind)`` gives the record of type ``kind`` or ``None``, ignoring a foreign
  or corrupted entry with a ``CacheWarning``; ``put(key, record, kind)`` stores it.
- ``cached_answer(cache, kind, key, answer)`` joins them for an entry point taking ``cache: bool | ResultCache``:
  the kept record, else ``answer()``, kept.

The cache stores result records (``vramsim/results/``), not the traced graph: a record is small, holds the advice
and every what-if already answered, and reads back equal to what was put (``records.py``), so a cached answer is the
one the API returns. A caller keys its own request:

>>> quote = cached_answer(  # doctest: +SKIP
...     cache, Quote, lambda: request_key("plan", model, options, sheet=Path(sheet), hours=hours), lambda: _quote(...)
... )
"""

from vramsim.cache.keys import request_key
from vramsim.cache.store import ResultCache, cached_answer

__all__ = ["ResultCache", "cached_answer", "request_key"]
