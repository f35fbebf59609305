"""How a subcommand shows its work: a spinner while it runs, then its result as JSON or as its view."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console

__all__ = ["progress", "show"]


@contextlib.contextmanager
def progress(args: argparse.Namespace, text: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while the command works, told what it is doing; none when ``--quiet`` or when
    stderr is not a terminal (a pipe or a log file gets only the result)."""
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        yield lambda _: None
        return
    with Console(stderr=True).status(text) as status:
        yield lambda update: status.update(update)


def show(args: argparse.Namespace, result: Any, render: Callable[[Any, Console], None], console: Console) -> None:
    """``--json``: the result's data; else its terminal view."""
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render(result, console)
