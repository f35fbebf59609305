"""``vramsim fit``: the largest batch size and sequence length that fit, under the cheapest layout with
``--strategies``; without ``--device``, which catalog GPUs hold the job."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.cli.output import progress, result_cache, say_if_cached, show
from vramsim.cli.pages import write_page

if TYPE_CHECKING:
    from vramsim.results.device_fit import DeviceFit
    from vramsim.results.fit import LargestFit
    from vramsim.results.strategy import StrategySearch

__all__ = ["run"]


def run(command: Command, console: Console) -> int:
    """Search (each size a trace), then print the sizes found, after the strategies tried when asked for."""
    from vramsim.search.devices import ANY_DEVICE, device_fit
    from vramsim.search.fitting import largest_fit
    from vramsim.search.strategy import cheapest_strategy_reported
    from vramsim.views.fit import render_device_fit, render_fit, render_strategies

    args = command.args
    options = dict(command.options)
    any_device = options["device"] == ANY_DEVICE
    store = result_cache(command)
    cache = store or False
    if any_device and args.strategies:  # --device any itself is refused with --strategies (check_command)
        options.pop("device")  # the strategy search's device: the catalog default
    elif any_device:
        with progress(command, f"judging every GPU on a trace of {args.model}") as told:
            found = device_fit(args.model, progress=told, cache=cache, **options)
        say_if_cached(store)
        show(command, found, render_device_fit, console)
        _write_page(command, found, None)
        return 0
    with progress(command, f"searching the largest fit of {args.model}") as told:
        search, winner = (
            cheapest_strategy_reported(args.model, progress=told, cache=cache, **options) if args.strategies else (None, None)
        )
        if search is not None and search.cheapest is None:
            fit = None
        else:
            fit = largest_fit(
                args.model, traced=winner, progress=told, cache=cache, **options | (search.options() if search else {})
            )
    say_if_cached(store)
    if search is None:
        show(command, fit, render_fit, console)
    elif args.json:
        print(json.dumps({"strategies": search.to_dict(), "largest": fit.to_dict() if fit else None}, indent=2))
    else:
        render_strategies(search, console, verbose=args.verbose)
        if fit is not None:
            console.print("Under that setting:")
            render_fit(fit, console)
    _write_page(command, fit, search)
    return 0


def _write_page(command: Command, fit: LargestFit | DeviceFit | None, search: StrategySearch | None) -> None:
    """``--html``: the search's page."""
    if command.args.html:
        from vramsim.views.html import fit_html

        write_page(command.args.html, fit_html(fit, search))
