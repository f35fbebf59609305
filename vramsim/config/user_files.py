"""``path/to/file.py:function``, the way the command line names a user's own Python: checked without importing it."""

from __future__ import annotations

from pathlib import Path

from vramsim.errors import ConfigError

__all__ = ["user_function_file"]


def user_function_file(source: str, option: str | None = None) -> tuple[Path, str]:
    """The file and the function name ``source`` (the value of ``option``, where one is named) gives; a ConfigError
    when it names no function or no file, so the command line answers before anything (torch, the user's file) is
    imported."""
    given = source if option is None else f"{option}={source!r}"
    path_text, sep, name = source.rpartition(":")
    if not sep or not path_text.endswith(".py") or not name:
        raise ConfigError(f"{given} names no function; pass path/to/file.py:function")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ConfigError(f"{given}: {path} does not exist; pass path/to/file.py:function")
    return path, name
