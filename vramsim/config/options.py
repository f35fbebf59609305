"""How each option is offered outside Python: its flag on the command line, its value in the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COMMANDS", "Option", "as_is", "option"]

COMMANDS = ("trace", "validate")
"""The CLI commands that run a workload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """How one ``SimulationConfig`` field is offered outside Python: the CLI flag and the report.

    The CLI's arguments and the report's JSON ``options`` are derived from these, so a new
    field is declared once, here.
    """

    help: str
    """What the option does; also the field's documentation."""
    cli: bool = True
    """Whether the command line sets it; False for Python-only values (callables)."""
    flag: str | None = None
    """The flag, when not ``--`` + the field name with dashes."""
    parse: Callable[[str], Any] | None = None
    """Turns the flag's text into the field's value (``None``: the text itself; bools are switches)."""
    commands: tuple[str, ...] = COMMANDS
    """The CLI commands that take it."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """A command's own default where it differs from the field's."""
    report: Callable[[Any], Any] | None = None
    """The value the report's JSON ``options`` shows for it; ``None``: not shown."""


def option(**option: Any) -> dict[str, Option]:
    """A field's metadata: its ``Option``."""
    return {"option": Option(**option)}


def as_is(value: Any) -> Any:
    """A report's value for an option shown as the config holds it."""
    return value
