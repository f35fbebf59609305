"""API messages reworded as the command line says them, so an error names the flag the user typed."""

from __future__ import annotations

import re

from vramsim.config import options
from vramsim.config.serving import serve_options

__all__ = ["in_cli_words"]


def _flag_names() -> dict[str, str]:
    """Each option's Python name and its flag."""
    named = [*options(), *serve_options()]
    return {spec.name: option.flag or "--" + spec.name.replace("_", "-") for spec, option in named if option.cli}


def in_cli_words(message: str) -> str:
    """An API message as the command line says it: ``seq_len`` is ``--seq-len``, ``task='train'`` is ``--task train``.
    A name without an underscore is only rewritten with its value (``device='cpu'``): alone it is an English word."""
    for name, flag in _flag_names().items():
        message = re.sub(rf"(?<![\w./(-]){name}='?([^\s',;)]+)'?", rf"{flag} \1", message)
        if "_" in name:
            message = re.sub(rf"(?<![\w./(-])(?<!, ){name}(?![\w=,])", flag, message)  # not in a signature (a, b)
    return message
