"""A sweep's axes as the command line writes them: a list ``1,2,4``, or a range ``start:stop[:step]`` whose ends are
both included where the step lands on them, ``xK`` a step that multiplies (``512:32768:x2``)."""

from __future__ import annotations

from collections.abc import Iterable

from vramsim.errors import ConfigError

__all__ = ["MAX_POINTS", "axis_values", "parse_names", "parse_values"]

MAX_POINTS = 100_000
"""Most points one sweep answers: a range with a small step over a large span is a typo, not a question."""


def parse_values(text: str, name: str) -> tuple[int, ...]:
    """``--batch-size 1,2,4,8`` or ``--seq-len 512:32768:x2`` (items of a list may be ranges): sorted, each once."""
    values: set[int] = set()
    for item in text.split(","):
        values.update(_range(item.strip(), name) if ":" in item else (_count(item.strip(), name, text),))
        if len(values) > MAX_POINTS:
            raise ConfigError(f"--{_flag(name)} {text!r} has more than {MAX_POINTS:,} values; give a larger step")
    return tuple(sorted(values))


def parse_names(text: str, name: str) -> tuple[str, ...]:
    """``--device h100,a100-80gb`` or ``--checkpointing none,full``: each name once, in the order given."""
    names = [item.strip() for item in text.split(",")]
    if not all(names):
        raise ConfigError(f"--{_flag(name)} {text!r} has an empty item; give names separated by commas, e.g. a,b")
    return tuple(dict.fromkeys(names))


def axis_values(value: int | str | Iterable[int] | Iterable[str], name: str) -> tuple:
    """One axis of ``vramsim.sweep``: a single value, a sequence of them, or (str) the command line's list or range."""
    if isinstance(value, str):
        return parse_names(value, name) if name in ("device", "checkpointing") else parse_values(value, name)
    if isinstance(value, int):
        return (value,)
    values = tuple(dict.fromkeys(value))
    if not values:
        raise ConfigError(f"{name} is empty; give at least one value")
    return tuple(sorted(values)) if name in ("batch_size", "seq_len", "gpus") else values


def _range(item: str, name: str) -> range | list[int]:
    """``start:stop[:step]``: an arithmetic range, or with ``xK`` a geometric one, both ends included."""
    parts = item.split(":")
    if len(parts) not in (2, 3):
        raise ConfigError(f"--{_flag(name)} {item!r}: a range is start:stop or start:stop:step (step K or xK)")
    start, stop = (_count(part, name, item) for part in parts[:2])
    if stop < start:
        raise ConfigError(f"--{_flag(name)} {item!r}: the range ends ({stop}) before it starts ({start})")
    step = parts[2].strip() if len(parts) == 3 else "1"
    if step.lower().startswith("x"):
        factor = _count(step[1:], name, item)
        if factor < 2:
            raise ConfigError(f"--{_flag(name)} {item!r}: a multiplying step is x2 or more")
        values = [start]
        while values[-1] * factor <= stop:
            values.append(values[-1] * factor)
        return values
    if len(range(start, stop + 1, _count(step, name, item))) > MAX_POINTS:
        raise ConfigError(f"--{_flag(name)} {item!r} has more than {MAX_POINTS:,} values; give a larger step")
    return range(start, stop + 1, _count(step, name, item))


def _count(text: str, name: str, given: str) -> int:
    """A whole number of 1 or more."""
    if not text.strip().isdigit() or int(text) < 1:
        raise ConfigError(f"--{_flag(name)} {given!r}: {text.strip()!r} is not a whole number of 1 or more")
    return int(text)


def _flag(name: str) -> str:
    return name.replace("_", "-")
