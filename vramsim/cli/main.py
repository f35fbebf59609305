"""The ``vramsim`` command: the only place that prints an error or returns an exit code."""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable

from rich.console import Console

from vramsim.cli import checkpoint, compare, fit, inspect, listing, plan, serve, sweep, trace, validate
from vramsim.cli.arguments import BAD_ARGUMENT_EXIT, parse_arguments
from vramsim.cli.command import Command, check_command
from vramsim.cli.startup import import_tracing_stack
from vramsim.cli.variants import split_variants
from vramsim.cli.wording import cli_message, in_cli_words
from vramsim.errors import CacheWarning, ConfigError, VramsimError
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
    "plan": plan.run,
    "sweep": sweep.run,
    "models": listing.run,
    "gpus": listing.run,
}
"""Each subcommand's work, once its arguments are checked."""
_LISTINGS = ("models", "gpus")
"""The subcommands that list what vramsim knows, with no torch."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code: 0 done, 1 an error, ``BAD_ARGUMENT_EXIT`` (2) a bad argument,
    ``NOT_FIT_EXIT`` (3) ``trace --fail-if-not-fit`` that does not fit, ``plan --fail-if-none`` that nothing holds."""
    started = time.perf_counter()
    argv, variant_flags = split_variants(sys.argv[1:] if argv is None else argv)
    args = parse_arguments(argv)
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
    if args.command not in _LISTINGS:
        import_tracing_stack()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line(warnings.showwarning)
            return _RUNS[args.command](command, Console(file=trimmed_lines(sys.stdout)))
    except VramsimError as exc:
        return _error(exc, 1)
    except MemoryError:
        print("vramsim: error: out of host memory; try a smaller --batch-size or --seq-len", file=sys.stderr)
        return 1


def _one_line(show: Callable[..., None]) -> Callable[..., None]:
    """``warnings.showwarning`` printing vramsim's own warnings as ``vramsim: warning: <message>``; others as before."""

    def shown(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
        if issubclass(category, CacheWarning):
            print(f"vramsim: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return shown


def _error(exc: VramsimError, status: int) -> int:
    """The one line an error gets, in the command line's words; ``status`` is returned."""
    print(f"vramsim: error: {cli_message(exc)}", file=sys.stderr)
    return status
