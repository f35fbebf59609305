"""A griffe extension for docs/api.md: each docstring's doctest block (``>>>`` lines and the output
after them, up to a blank line) is rendered as a ``pycon`` code block.

The docstrings are prose with doctests and no section headers; as Markdown, a doctest's output such as
``['model.safetensors', 'optimizer.pt']`` reads as a cross-reference and fails ``mkdocs build --strict``.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    out: list[str] = []
    indent: str | None = None  # the open block's indentation, None outside one
    in_fence = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        if indent is not None and not stripped:
            out += [f"{indent}```", line]
            indent = None
            continue
        if indent is None and stripped.startswith("```"):
            in_fence = not in_fence
        elif indent is None and not in_fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
