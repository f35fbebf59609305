"""How a subcommand shows its work: progress on stderr while it runs, then its result as JSON or as its view."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console

from vramsim.cli.command import Command

if TYPE_CHECKING:
    from vramsim.cache import ResultCache

__all__ = ["ANSWERED_FROM_CACHE", "PROGRESS_LINES_AFTER", "Progress", "progress", "result_cache", "say_if_cached", "show"]

ANSWERED_FROM_CACHE = "answered from the result cache, nothing traced (--no-cache traces again)"
"""What a command says on stderr when its answer was kept from an earlier identical request."""

PROGRESS_LINES_AFTER = 5.0
"""Seconds into a command after which stderr that is not a terminal (a pipe, a CI log) gets a line per stage:
a quick command prints nothing there, a long one says what it is doing."""


class Progress:
    """Told each stage of the work (each further trace, as ``simulate``'s ``progress`` is); counts them.

    ``show`` gets each stage, the first at once; with ``delay`` (seconds), only once that delay has passed, the
    stage then under way first (never, with an infinite delay).
    """

    def __init__(self, text: str, show: Callable[[str], None], *, delay: float = 0.0) -> None:
        self.stages = 0
        """Updates told after the first stage: each is a further trace."""
        self._show, self._current, self._shown = show, text, delay <= 0
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(delay, 0.0), self._start)
        self._timer.daemon = True
        if self._shown:
            show(text)
        elif math.isfinite(delay):
            self._timer.start()

    def __call__(self, update: str) -> None:
        with self._lock:
            self.stages += 1
            self._current = update
            if self._shown:
                self._show(update)

    def _start(self) -> None:
        with self._lock:
            self._shown = True
            self._show(self._current)

    def stop(self) -> None:
        """No further stage is shown (the command has its answer)."""
        self._timer.cancel()
        self._shown = False


@contextlib.contextmanager
def progress(command: Command, text: str) -> Iterator[Progress]:
    """Progress on stderr while the command works: a spinner on a terminal; otherwise a line per stage once the
    command has run ``PROGRESS_LINES_AFTER`` seconds; none with ``--quiet``."""
    if getattr(command.args, "quiet", False):
        yield Progress(text, lambda _: None)
    elif sys.stderr.isatty():
        with Console(stderr=True).status(text) as status:
            yield Progress(text, status.update)
    else:
        delay = PROGRESS_LINES_AFTER - (time.perf_counter() - command.started)
        told = Progress(text, lambda stage: print(f"vramsim: {stage} ...", file=sys.stderr, flush=True), delay=delay)
        try:
            yield told
        finally:
            told.stop()


def show(command: Command, result: Any, render: Callable[[Any, Console], None], console: Console) -> None:
    """``--json``: the result's data; else its terminal view."""
    if command.args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render(result, console)


def result_cache(command: Command) -> ResultCache | None:
    """The store the command's answer is kept in and read from (``vramsim/cache/``): none with ``--no-cache`` or
    ``VRAMSIM_NO_CACHE``."""
    from vramsim.cache import ResultCache

    return None if command.args.no_cache else ResultCache.default()


def say_if_cached(store: ResultCache | None) -> None:
    """One line on stderr where ``store`` answered the whole command: the figures shown were traced by an earlier
    run (a command that asked it twice and traced one answer says nothing)."""
    if store is not None and store.answered and not store.missed:
        print(f"vramsim: {ANSWERED_FROM_CACHE}", file=sys.stderr)
