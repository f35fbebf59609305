"""The one exception hierarchy of vramsim.

    VramsimError
      ModelNotFoundError   unknown id, offline, unreadable config
      ConfigError          bad option value        (also a ValueError)
      UnsupportedError     not modelled yet        (also a NotImplementedError)
      TraceError           the model failed on the meta device

The CLI prints ``vramsim: error: <message>`` for any of them and exits 1, so every message
is one line that names what is wrong and what to do.
"""

from __future__ import annotations

__all__ = ["ConfigError", "ModelNotFoundError", "TraceError", "UnsupportedError", "VramsimError"]


class VramsimError(Exception):
    """Base class of every error vramsim raises on purpose."""


class ModelNotFoundError(VramsimError):
    """The model id, folder or config could not be resolved or read."""


class ConfigError(VramsimError, ValueError):
    """An option has a value vramsim cannot accept."""


class UnsupportedError(VramsimError, NotImplementedError):
    """The request is valid but vramsim does not model it (yet)."""


class TraceError(VramsimError):
    """The model failed while running on the meta device."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message: the part a one-line error can carry."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
