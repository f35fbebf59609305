"""The ``vramsim`` command: the only place that prints an error or returns an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from rich.console import Console

from vramsim.cli import checkpoint, fit, listing, serve, trace, validate
from vramsim.cli.arguments import build_parser, subparser
from vramsim.cli.wording import in_cli_words
from vramsim.errors import VramsimError

__all__ = ["main"]

_RUNS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "trace": trace.run,
    "validate": validate.run,
    "fit": fit.run,
    "checkpoint": checkpoint.run,
    "serve": serve.run,
    "models": listing.run,
    "gpus": listing.run,
}
"""Each subcommand's work, once its arguments parsed."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (``NOT_FIT_EXIT`` for ``trace --fail-if-not-fit`` that does not fit)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command's own parser, whose --help lists what it takes
        subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    console = Console()
    try:
        return _RUNS[args.command](args, console)
    except VramsimError as exc:
        print(f"vramsim: error: {in_cli_words(str(exc))}", file=sys.stderr)
        return 1
    except MemoryError:
        print("vramsim: error: out of host memory; try a smaller --batch-size or --seq-len", file=sys.stderr)
        return 1
