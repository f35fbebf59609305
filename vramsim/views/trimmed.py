"""A text stream that drops the spaces rich leaves at the end of a line, for every surface that prints a view."""

from __future__ import annotations

import io
from typing import TextIO, cast

__all__ = ["trimmed_lines"]


class _TrimmedLines(io.TextIOBase):
    """stdout for the views' console, each line without the spaces rich leaves where it wraps or pads a line
    (invisible on a terminal, noise in a file, a diff or a test)."""

    def __init__(self, out: TextIO) -> None:
        self._out, self._partial = out, ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return self._out.isatty()

    def fileno(self) -> int:
        return self._out.fileno()


def trimmed_lines(out: TextIO) -> TextIO:
    """``out``, each line written to it without trailing spaces (a text stream, if not typeshed's ``TextIO``)."""
    return cast(TextIO, _TrimmedLines(out))
