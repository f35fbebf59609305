"""The one exception hierarchy of vramsim.

    VramsimError
      ModelNotFoundError   unknown id, offline, unreadable config
      ConfigError          bad option value        (also a ValueError)
        EngineRefusedError a serving engine would refuse to start (its own start-up check)
      UnsupportedError     not modelled yet        (also a NotImplementedError)
      TraceError           the model failed on the meta device

The CLI prints ``vramsim: error: <message>`` for any of them and exits 1 (2 for a ConfigError
its argument checks raise), so every message is one line that names what is wrong and what to do.
A message that quotes the user's own code or model (an exception's first line) passes that text as
``quoted``, kept apart from vramsim's words: the CLI rewords vramsim's words only.

One warning class, ``CacheWarning`` (a result-cache entry ignored, or a cache that cannot be written); the CLI
prints ``vramsim: warning: <message>``.
"""

from __future__ import annotations

__all__ = [
    "CacheWarning",
    "ConfigError",
    "EngineRefusedError",
    "ModelNotFoundError",
    "TraceError",
    "UnsupportedError",
    "VramsimError",
]


class VramsimError(Exception):
    """Base class of every error vramsim raises on purpose: ``own`` is vramsim's words, ``quoted`` what they quote
    (the message is ``own: quoted``, or ``quoted`` alone)."""

    def __init__(self, *args: object, quoted: str | None = None) -> None:
        own = str(args[0]) if args else ""
        if quoted is not None:
            args = (f"{own}: {quoted}" if own else quoted, *args[1:])
        super().__init__(*args)
        self.own = own
        """The message vramsim composed, without ``quoted``."""
        self.quoted = quoted
        """Text quoted from the user's code or model, word for word; ``None`` when the message quotes none."""


class ModelNotFoundError(VramsimError):
    """The model id, folder or config could not be resolved or read."""


class ConfigError(VramsimError, ValueError):
    """An option has a value vramsim cannot accept."""


class EngineRefusedError(ConfigError):
    """A serving engine refuses to start with these settings, as its own start-up check does (vLLM: a KV cache
    that holds no request of ``max_model_len`` tokens); ``vramsim compare --serve`` shows it as a row that does
    not start."""


class UnsupportedError(VramsimError, NotImplementedError):
    """The request is valid but vramsim does not model it (yet)."""


class TraceError(VramsimError):
    """The model failed while running on the meta device."""


class CacheWarning(UserWarning):
    """A result-cache entry that cannot be trusted was ignored, or the cache cannot be written: the job is traced."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message: the part a one-line error can carry."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
