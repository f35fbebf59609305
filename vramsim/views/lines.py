"""Long lines wrapped to the terminal's width the way a reader needs them: a figure stays with its unit.

rich wraps at every space, so ``-12.58 GiB)`` can end one line at ``-12.58`` and start the next at
``GiB)``, a short note such as ``(traced)`` can be left alone on a line, and each wrapped line keeps the
space it was cut at. ``wrap`` cuts only between words, where a word is a figure with its unit or a word
with the note that follows it, drops the spaces at the cuts, and indents the lines after the first.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

__all__ = ["print_wrapped", "wrap"]

_WORD = re.compile(r"\S+")
_UNIT = re.compile(r"(?:B|KiB|MiB|GiB|TiB)\b")
"""A unit that belongs to the number before it (``format_bytes`` writes them)."""
_NOTE = re.compile(r"\((?:traced|fits)\)")
"""A note that belongs to the word before it (``advice_line`` writes them)."""


def wrap(text: Text | str, width: int, *, indent: int = 2) -> list[Text]:
    """``text`` cut into lines of at most ``width`` cells, the lines after the first indented by ``indent``;
    styles are kept. A single word wider than a line (a long path) is folded, as a terminal would."""
    line = Text(text) if isinstance(text, str) else text
    fold = max(width - indent, 1)
    words = [(cut, min(cut + fold, end)) for start, end in _words(line.plain) for cut in range(start, end, fold)]
    if not words:
        return [line]
    lines: list[Text] = []
    start, end = words[0]
    for word_start, word_end in words[1:]:
        room = width - (indent if lines else 0)
        if word_end - start <= room:
            end = word_end
            continue
        lines.append(line[start:end])
        start, end = word_start, word_end
    lines.append(line[start:end])
    return [lines[0], *(Text.assemble(" " * indent, each) for each in lines[1:])]


def print_wrapped(console: Console, text: Text | str, *, indent: int = 2) -> None:
    """``text`` printed wrapped to ``console``'s width (``wrap``), keeping its leading spaces."""
    for line in wrap(text, console.width, indent=indent):
        console.print(line, soft_wrap=True)


def _words(plain: str) -> list[tuple[int, int]]:
    """Where each unbreakable word is: a figure joined with its unit, a word with its note; the leading
    spaces of the text belong to its first word."""
    words: list[tuple[int, int]] = []
    for match in _WORD.finditer(plain):
        glued = words and ((_UNIT.match(match.group()) and plain[words[-1][1] - 1].isdigit()) or _NOTE.match(match.group()))
        if glued:
            words[-1] = (words[-1][0], match.end())
        else:
            words.append((match.start() if words else 0, match.end()))
    return words
