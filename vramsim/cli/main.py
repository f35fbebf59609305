"""The ``vramsim`` command: the only place that prints an error or returns an exit code."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console

from vramsim.cli import checkpoint, compare, fit, inspect, listing, serve, sweep, trace, validate
from vramsim.cli.arguments import BAD_ARGUMENT_EXIT, build_parser, subparser
from vramsim.cli.command import Command, check_command
from vramsim.cli.variants import split_variants
from vramsim.cli.wording import cli_message, in_cli_words
from vramsim.errors import ConfigError, VramsimError
from vramsim.views.trimmed import trimmed_lines

__all__ = ["main"]

_RUNS: dict[str, Callable[[Command, Console], int]] = {
    "trace": trace.run,
    "validate": validate.run,
    "fit": fit.run,
    "checkpoint": checkpoint.run,
    "serve": serve.run,
    "inspect": inspect.run,
    "compare": compare.run,
    "sweep": sweep.run,
    "models": listing.run,
    "gpus": listing.run,
}
"""Each subcommand's work, once its arguments are checked."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code: 0 done, 1 an error, ``BAD_ARGUMENT_EXIT`` (2) a bad argument,
    ``NOT_FIT_EXIT`` (3) ``trace --fail-if-not-fit`` that does not fit."""
    started = time.perf_counter()
    parser = build_parser()
    argv, variant_flags = split_variants(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command's own parser, whose --help lists what it takes
        subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    if variant_flags is not None:
        args.variant_flags = variant_flags
    try:
        command = check_command(args, started)
    except ConfigError as exc:
        return _error(exc, BAD_ARGUMENT_EXIT)
    except VramsimError as exc:
        return _error(exc, 1)
    for warning in command.warnings:
        print(f"vramsim: warning: {in_cli_words(warning)}", file=sys.stderr)
    try:
        return _RUNS[args.command](command, Console(file=trimmed_lines(sys.stdout)))
    except VramsimError as exc:
        return _error(exc, 1)
    except MemoryError:
        print("vramsim: error: out of host memory; try a smaller --batch-size or --seq-len", file=sys.stderr)
        return 1


def _error(exc: VramsimError, status: int) -> int:
    """The one line an error gets, in the command line's words; ``status`` is returned."""
    print(f"vramsim: error: {cli_message(exc)}", file=sys.stderr)
    return status
