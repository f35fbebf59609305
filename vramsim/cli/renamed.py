"""Old spellings the command line still takes, each answered by a warning naming the new one: one name per idea
across commands (``--offload`` for both CPU offloads; ``nf4-dq``, as ``trace`` calls it, for vLLM's bitsandbytes)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RENAMED", "Renamed", "renamed_arguments", "renamed_warnings"]


@dataclass(frozen=True, slots=True)
class Renamed:
    """A flag, or one value of a flag, that was spelled otherwise before."""

    old: str
    """The old flag."""
    new: str
    """The flag that took its place (the same flag where only a value was renamed)."""
    commands: tuple[str, ...]
    value: str | None = None
    """The old value, where a value was renamed; ``None``: the flag itself was."""
    new_value: str | None = None


RENAMED = (
    Renamed("--offload-states", "--offload", commands=("trace", "validate", "fit", "checkpoint")),
    Renamed("--no-search", "--quick", commands=("trace",)),
    Renamed("--quantization", "--quantization", commands=("serve",), value="bitsandbytes", new_value="nf4-dq"),
)


class _OldFlag(argparse.Action):
    """Sets the new flag's option, parsed as the new flag parses it, and notes the old spelling."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: argparse.Action, **kwargs: Any) -> None:
        parse = new.type if callable(new.type) else None
        switch = {"nargs": 0, "const": new.const} if new.nargs == 0 else {}  # a switch (store_true) renamed
        super().__init__(option_strings, new.dest, type=parse, metavar=new.metavar, help=argparse.SUPPRESS, **switch, **kwargs)
        self.new = new

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        new = self.new.option_strings[0]
        if self.nargs == 0:
            setattr(namespace, self.dest, self.const)
            _note(namespace, f"{option} is now {new}")
        else:
            setattr(namespace, self.dest, values)
            _note(namespace, f"{option} is now {new}; give {new} {values}")


def _note(namespace: argparse.Namespace, warning: str) -> None:
    namespace.renamed = [*getattr(namespace, "renamed", []), warning]


def renamed_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The old flags of ``command``, hidden from its ``--help``; call once its new flags are added."""
    flags = {flag: action for action in parser._actions for flag in action.option_strings}
    for renamed in RENAMED:
        if renamed.value is None and command in renamed.commands:
            parser.add_argument(renamed.old, action=_OldFlag, new=flags[renamed.new])


def renamed_warnings(args: argparse.Namespace) -> list[str]:
    """The old spellings ``args`` used, each now its new one, and a warning line for each."""
    warnings: list[str] = getattr(args, "renamed", [])
    for renamed in RENAMED:
        if renamed.value is None or args.command not in renamed.commands:
            continue
        dest = renamed.new.removeprefix("--").replace("-", "_")
        if str(getattr(args, dest, "")).lower() == renamed.value:
            setattr(args, dest, renamed.new_value)
            warnings.append(f"{renamed.old} {renamed.value} is now {renamed.new} {renamed.new_value}")
    return warnings
