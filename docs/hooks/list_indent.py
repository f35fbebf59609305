"""An mkdocs hook: lists written the GitHub way render the same on the site.

The pages keep the README's text as it was, with list items' nested lists, tables and further
paragraphs indented by two spaces (to the item's text, as GitHub reads them). Python-Markdown wants
four spaces per level: with two, a nested list flattens and a paragraph after a table swallows the
next item. At build time each line inside a list item is re-indented from the item's text column to
Python-Markdown's (four spaces per level), and an item that follows a sibling of several blocks gets the
blank line Python-Markdown needs to start it; the files themselves are not changed.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = re.compile(r"( *)([-*+]|\d{1,9}[.)])( +|$)")
FENCE = re.compile(r" *(```|~~~)")


def reindent_lists(markdown: str) -> str:
    out: list[str] = []
    # open items: their text's column as written, as Python-Markdown wants it, whether a blank line is inside
    stack: list[list[Any]] = []
    previous_blank = True
    fence: tuple[str, int] | None = None  # an open fenced block: its marker and the shift of its lines
    for line in markdown.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        if fence is not None:
            out.append(" " * fence[1] + line if line.strip() else line)
            if line.strip().startswith(fence[0]):
                fence = None
            previous_blank = False
            continue
        if not line.strip():
            out.append(line)
            previous_blank = True
            continue
        marker = MARKER.match(line)
        if marker or previous_blank or FENCE.match(line):
            loose = False
            while stack and indent < stack[-1][0]:
                loose = loose or stack.pop()[2]
            if marker and loose and not previous_blank:
                out.append("")
        if stack and previous_blank and indent >= stack[-1][0]:
            stack[-1][2] = True
        if not stack:
            new = indent
        elif indent >= stack[-1][0]:
            written, wanted, _ = stack[-1]
            new = wanted if marker else wanted + indent - written
        else:
            new = indent  # a lazy continuation line: Python-Markdown takes it as it is
        if marker:
            stack.append([marker.end() if marker.group(3) else indent + len(marker.group(2)) + 1, new + 4, False])
        if opening := FENCE.match(line):
            fence = (opening.group(1), new - indent)
        out.append(" " * new + line[indent:])
        previous_blank = False
    return "\n".join(out)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return reindent_lists(markdown)
