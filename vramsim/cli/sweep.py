"""``vramsim sweep``: every point of a grid, most derived from a few traces; a progress bar on stderr meanwhile."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from vramsim.cli.command import Command
from vramsim.cli.output import result_cache, say_if_cached

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Sweep (or read the same sweep from the result cache), then print the table and the largest fitting points
    (or ``--json``, ``--csv``)."""
    from vramsim.search.sweep import sweep
    from vramsim.views.sweep import render_sweep, sweep_csv

    args = command.args
    store = result_cache(command)
    with _progress_bar(quiet=args.quiet) as told:
        found = sweep(
            args.model,
            backend=args.backend,
            address=args.address,
            jobs=args.jobs,
            progress=told,
            cache=store or False,
            **command.options,
        )
    say_if_cached(store)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
    elif args.csv:
        sys.stdout.write(sweep_csv(found))
    else:
        render_sweep(found, console)
    return 0


@contextlib.contextmanager
def _progress_bar(*, quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A bar per stage (tracing, answering) on stderr; nothing with ``--quiet``."""
    if quiet:
        yield lambda stage, done, total: None
        return
    bars = Progress(
        TextColumn("vramsim: {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    tasks: dict[str, TaskID] = {}

    def told(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bars.add_task(stage, total=total)
        bars.update(tasks[stage], completed=done, total=total)

    with bars:
        yield told
