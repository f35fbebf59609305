"""The answers on disk: one gzipped JSON entry per key under ``$XDG_CACHE_HOME/vramsim`` (``~/.cache/vramsim``).

An entry names its schema, its key and the record type it holds beside the record; one that cannot be read, or
names another schema, key or type, or whose record does not read back, is foreign: ``get`` ignores it with a
``CacheWarning`` and the answer is traced again (its ``put`` replaces the entry). Entries are written to a
temporary file and renamed into place, so a reader never sees half of one.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from vramsim.cache.records import Unencodable, from_data, to_data
from vramsim.errors import CacheWarning

__all__ = ["NO_CACHE_VARIABLE", "SCHEMA", "ResultCache", "cached_answer"]

T = TypeVar("T")

SCHEMA = 1
"""The entries' layout; an entry of another is foreign."""

NO_CACHE_VARIABLE = "VRAMSIM_NO_CACHE"
"""Set (to anything but empty or 0), the default cache is off: every command and ``simulate`` call traces."""


class ResultCache:
    """Records by request key (``vramsim.cache.request_key``), in one folder."""

    __slots__ = ("answered", "missed", "root")

    def __init__(self, root: Path) -> None:
        self.root = root
        self.answered = 0
        """How many ``get`` calls this store answered: 0 after a call that traced."""
        self.missed = 0
        """How many ``get`` calls found no entry to trust (the answer was traced): 0 where every one answered."""

    @classmethod
    def default(cls) -> ResultCache | None:
        """``$XDG_CACHE_HOME/vramsim`` (an absolute XDG_CACHE_HOME, as the XDG spec asks; else ``~/.cache``);
        ``None`` when ``VRAMSIM_NO_CACHE`` turns the cache off."""
        if os.environ.get(NO_CACHE_VARIABLE, "") not in ("", "0"):
            return None
        base = os.environ.get("XDG_CACHE_HOME", "")
        return cls((Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "vramsim")

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives."""
        return self.root / key[:2] / f"{key}.json.gz"

    def get(self, key: str, kind: Any) -> Any | None:
        """The record of type ``kind`` (a results dataclass, ``list[Report]``...) stored under ``key``; ``None``
        where there is none, or where the entry is foreign (with a ``CacheWarning``)."""
        path = self.path(key)
        try:
            record = _read(path, key, kind)
        except FileNotFoundError:
            self.missed += 1
            return None
        except _Foreign as exc:
            warnings.warn(f"ignored the result cache entry {path}: {exc}; tracing again", CacheWarning, stacklevel=2)
            self.missed += 1
            return None
        self.answered += 1
        return record

    def put(self, key: str, record: Any, kind: Any) -> bool:
        """Store ``record`` (of type ``kind``) under ``key``; False where it cannot be stored exactly (nothing is
        written) or the folder cannot be written (with a ``CacheWarning``)."""
        try:
            data = to_data(record, kind)
        except Unencodable:
            return False
        entry = {"schema": SCHEMA, "key": key, "kind": _kind_name(kind), "record": data}
        try:
            _write(self.path(key), entry)
        except OSError as exc:
            warnings.warn(f"the result cache {self.root} cannot be written ({exc.strerror or exc}); the answer is not cached",
                          CacheWarning, stacklevel=2)  # fmt: skip
            return False
        return True

    def __repr__(self) -> str:
        return f"<ResultCache {self.root}>"


def cached_answer(cache: bool | ResultCache, kind: Any, key: Callable[[], str | None], answer: Callable[[], T]) -> T:
    """The record of type ``kind`` kept under ``key()``, else ``answer()``, then kept. ``cache``: True, the default
    store (``ResultCache.default()``); False, none (always ``answer()``); or a store. ``key`` is called only where
    there is a store; its ``None`` (an unkeyable request) is answered and not kept."""
    store = cache if isinstance(cache, ResultCache) else ResultCache.default() if cache else None
    request = None if store is None else key()
    if store is None or request is None:
        return answer()
    found = store.get(request, kind)
    if found is not None:
        return found  # type: ignore[no-any-return]
    record = answer()
    store.put(request, record, kind)
    return record


def _kind_name(kind: Any) -> str:
    """The record type as an entry names it (``vramsim.results.report.Report``, ``list[vramsim.results.report.Report]``)."""
    return f"{kind.__module__}.{kind.__qualname__}" if isinstance(kind, type) else str(kind)


def _write(path: Path, entry: dict[str, Any]) -> None:
    """``entry`` at ``path``, through a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as raw, gzip.open(raw, "wt", encoding="utf-8") as packed:
            json.dump(entry, packed, separators=(",", ":"))
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)  # there only where the write failed


class _Foreign(Exception):
    """Why an entry is not trusted."""


def _read(path: Path, key: str, kind: Any) -> Any:
    """The record in the entry at ``path``; ``_Foreign`` where it is not the entry of ``key`` holding a ``kind``."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as file:
            entry = json.load(file)
    except FileNotFoundError:
        raise  # no entry, which is not a foreign one
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Foreign(f"unreadable ({type(exc).__name__})") from exc
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA:
        raise _Foreign("another schema")
    if entry.get("key") != key or entry.get("kind") != _kind_name(kind):
        raise _Foreign("it holds another request")
    try:
        return from_data(entry.get("record"), kind)
    except (TypeError, KeyError, ValueError, ArithmeticError) as exc:
        raise _Foreign("its record does not read back") from exc
