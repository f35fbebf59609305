"""API messages reworded as the command line says them, so an error names the flag the user typed.

Only vramsim's own words are reworded: an error's ``quoted`` text (the user's code or model speaking, e.g. an
exception's ``dtype=torch.long``) is printed as it came.
"""

from __future__ import annotations

import re

from vramsim.config import options
from vramsim.config.serving import serve_options
from vramsim.errors import VramsimError

__all__ = ["cli_message", "in_cli_words"]

_PYTHON_ONLY = {
    "inputs=lambda batch_size, seq_len: {...}": "--inputs path/to/file.py:function (def function(batch_size, seq_len) "
    "-> the model's keyword inputs)",
}
"""API suggestions no shell can pass, and what the command line takes instead."""


def _flag_names() -> dict[str, str]:
    """Each option's Python name and its flag."""
    named = [*options(), *serve_options()]
    return {spec.name: option.flag or "--" + spec.name.replace("_", "-") for spec, option in named if option.cli}


def in_cli_words(message: str) -> str:
    """An API message as the command line says it: ``seq_len`` is ``--seq-len``, ``task='train'`` is ``--task train``.
    A name without an underscore is only rewritten with its value (``device='cpu'``): alone it is an English word."""
    for python, cli in _PYTHON_ONLY.items():
        message = message.replace(python, cli)
    for name, flag in _flag_names().items():
        message = re.sub(rf"(?<![\w./(-]){name}='?([^\s',;)]+)'?", rf"{flag} \1", message)
        if "_" in name:
            message = re.sub(rf"(?<![\w./(-])(?<!, ){name}(?![\w=,])", flag, message)  # not in a signature (a, b)
    return message


def cli_message(exc: VramsimError) -> str:
    """An error's line: vramsim's words in the command line's, then what they quote, word for word."""
    own = in_cli_words(exc.own)
    if exc.quoted is None:
        return own
    return f"{own}: {exc.quoted}" if own else exc.quoted
