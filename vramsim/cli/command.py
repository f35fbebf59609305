"""One ``vramsim`` invocation with its arguments checked, before anything imports torch: what a subcommand runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from vramsim.checkpoints.choices import checkpoint_choice
from vramsim.cli.arguments import ANY_DEVICE_DEFAULT, SWEPT, argument_warnings, serving_options, workload_options
from vramsim.cli.exports import export_paths
from vramsim.cli.pages import check_page_arguments
from vramsim.cli.renamed import renamed_warnings
from vramsim.cli.variants import compare_variants
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError
from vramsim.pricing.load import load_sheet
from vramsim.pricing.sheet import PriceSheet
from vramsim.search.sweep_grid import axis_values

__all__ = ["Command", "check_command"]


@dataclass(frozen=True, slots=True)
class Command:
    """The parsed arguments, the options they make (checked by the config), and what the checks warned of."""

    args: argparse.Namespace
    options: dict[str, Any]
    """``simulate``'s (or ``serve``'s) keywords; empty for the listings."""
    warnings: tuple[str, ...]
    """One line each, in the API's words (the CLI rewords them as it prints them)."""
    started: float
    """``time.perf_counter()`` when the command began, for the wall time its report gives."""
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``compare``'s: each variant's label and its ``simulate`` keywords (``serve``'s, with ``--serve``): the shared
    flags, then its own."""
    sheet: PriceSheet | None = None
    """``plan``'s price sheet, read and checked with the arguments."""


def check_command(args: argparse.Namespace, started: float) -> Command:
    """The options of ``args``, built into their config so that a bad value is a ConfigError now: the config's
    checks need no torch, so a bad argument is answered at once."""
    warnings = renamed_warnings(args)
    if args.command not in ("models", "gpus"):
        check_page_arguments(args)
    if args.command == "serve":
        given = serving_options(args)
    elif args.command in ("models", "gpus"):
        given = {}
    elif args.command == "compare":
        variants = compare_variants(args)
        warnings += [warning for variant in variants for warning in variant.warnings]
        once = tuple(dict.fromkeys(warnings))  # a warning of the shared flags is every variant's: told once
        return Command(args=args, options={}, warnings=once, started=started, variants={v.label: v.options for v in variants})
    elif args.command == "sweep":
        given = _sweep_options(args)
        warnings += argument_warnings(args)
    else:
        given = workload_options(args)
        if args.command == "trace" and export_paths(args):
            given["memory_history"] = True  # what --memory-viz and --chrome-trace write
        if args.command == "fit" and args.strategies and args.device == "any" and args.device is not ANY_DEVICE_DEFAULT:
            raise ConfigError("--strategies weighs one device's memory: name it with --device (vramsim gpus), not any")
        if args.command == "plan":
            if args.mfu is not None and args.tokens is None:
                raise ConfigError("--mfu is the utilisation a duration from --tokens assumes; give --tokens, or drop --mfu")
            given_hours = args.hours if args.hours is not None else 24 * args.days if args.days is not None else None
            if args.stop_after is not None and given_hours is not None and args.stop_after > given_hours:
                raise ConfigError(
                    f"--stop-after is within the job: at most its {given_hours:g} hours; got {args.stop_after:g} hours"
                )
            warnings += SimulationConfig.from_options(**given).warnings
            return Command(args=args, options=given, warnings=tuple(warnings), started=started, sheet=load_sheet(args.prices))
        warnings += argument_warnings(args)
        checked = {**given, "device": "h100"} if given["device"] == ANY_DEVICE_DEFAULT else given  # fit: each GPU
        config = SimulationConfig.from_options(**checked)
        if args.command == "checkpoint":
            checkpoint_choice(config, args.save_format, args.map_location, args.async_save)
        warnings += config.warnings
    return Command(args=args, options=given, warnings=tuple(warnings), started=started)


def _sweep_options(args: argparse.Namespace) -> dict[str, Any]:
    """``vramsim.sweep``'s keywords: each axis parsed (a bad list or range is refused now), the rest as ``trace``'s;
    ``--gradient-checkpointing`` is the checkpointing axis ``full``. The options at each point are checked by the
    sweep before it traces."""
    given = workload_options(args)
    if given.pop("gradient_checkpointing"):
        given["checkpointing"] = "full"
    return given | {name: axis_values(given[name], name) for name in SWEPT if name in given}
