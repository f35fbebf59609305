"""A terminal view in the page, word for word: the words ``vramsim`` prints are the ones the page shows."""

from __future__ import annotations

import io
from collections.abc import Callable

from rich.console import Console

__all__ = ["TERMINAL_COLUMNS", "terminal_html"]

TERMINAL_COLUMNS = 110
"""Columns the terminal views are laid out in on the page: wide enough for the tables, narrow enough for a laptop."""


def terminal_html(render: Callable[[Console], None]) -> str:
    """What ``render`` prints to a terminal, as a ``<pre>`` block with its bold and colours."""
    console = Console(file=io.StringIO(), record=True, width=TERMINAL_COLUMNS, highlight=False, force_terminal=True)
    render(console)
    return console.export_html(inline_styles=True, code_format='<pre class="terminal">{code}</pre>')
