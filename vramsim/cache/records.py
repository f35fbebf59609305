"""Result records as JSON data and back, led by their type hints, so that a cached answer is the record itself.

``Report.to_dict`` is JSON for people (a tuple becomes a list, a ``Decimal`` is not JSON at all); the cache needs
the same record back, equal field for field. Both directions walk the record's dataclass fields with their type
hints: a ``tuple[int, ...]`` is stored as a list and read back as a tuple, a ``Decimal`` as its exact text, an
``int``-keyed dict with text keys, a ``Literal`` as one of its values. A value that the hints cannot carry back
exactly (under ``Any``, only JSON's own types can) raises ``Unencodable`` when it is stored, so an entry never
reads back as anything but what was put.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from decimal import Decimal
from typing import Any, Literal, Union

__all__ = ["Unencodable", "from_data", "to_data"]

_SCALARS = (bool, int, float, str, type(None))


class Unencodable(TypeError):
    """A value whose type hint cannot carry it back exactly; the record is not cached."""


def to_data(value: Any, hint: Any) -> Any:
    """``value`` (of type ``hint``: a record, or a ``list[Report]``...) as JSON data that ``from_data`` reads back."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return _json_only(value)
    if origin in (Union, types.UnionType):
        return to_data(value, _member(value, args))
    if origin is Literal:
        if not any(type(value) is type(choice) and value == choice for choice in args):
            raise Unencodable(f"{value!r} is not one of {args}")
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if type(value) is not hint:
            raise Unencodable(f"{type(value).__name__} is not {hint.__name__}")
        hints = _hints(hint)
        return {f.name: to_data(getattr(value, f.name), hints[f.name]) for f in dataclasses.fields(hint)}
    if origin in (list, tuple):
        if not isinstance(value, origin):
            raise Unencodable(f"{type(value).__name__} is not {origin.__name__}")
        return [to_data(item, _item_hint(args, index)) for index, item in enumerate(value)]
    if origin is dict:
        key_hint, value_hint = args
        if not isinstance(value, dict) or not all(type(key) is key_hint for key in value) or key_hint not in (str, int):
            raise Unencodable(f"a dict keyed by {key_hint} cannot be stored")
        return {str(key): to_data(item, value_hint) for key, item in value.items()}
    if hint is Decimal and isinstance(value, Decimal):
        return str(value)
    if hint in _SCALARS and isinstance(value, hint):
        return value
    if hint is float and type(value) is int:
        return value  # an int where a float is hinted (headroom=0) reads back as the same int
    raise Unencodable(f"{type(value).__name__} where {hint} is hinted")


def from_data(data: Any, hint: Any) -> Any:
    """The value ``to_data`` stored as ``data``; a TypeError, KeyError or ValueError where ``data`` is not one."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return _json_only(data)
    if origin in (Union, types.UnionType):
        return from_data(data, _member(data, args, reading=True))
    if origin is Literal:
        return data if any(type(data) is type(choice) and data == choice for choice in args) else _wrong(data, hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = _hints(hint)
        if not isinstance(data, dict) or set(data) != {f.name for f in dataclasses.fields(hint)}:
            raise KeyError(f"the fields of {hint.__name__}")
        return hint(**{name: from_data(item, hints[name]) for name, item in data.items()})
    if origin in (list, tuple):
        if not isinstance(data, list):
            raise TypeError(f"expected a list for {hint}")
        return origin(from_data(item, _item_hint(args, index)) for index, item in enumerate(data))
    if origin is dict:
        key_hint, value_hint = args
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {hint}")
        return {key_hint(key): from_data(item, value_hint) for key, item in data.items()}
    if hint is Decimal:
        return Decimal(data) if isinstance(data, str) else _wrong(data, hint)
    if hint in _SCALARS and (isinstance(data, hint) or (hint is float and type(data) is int)):
        return data
    return _wrong(data, hint)


_HINTS: dict[type, dict[str, Any]] = {}
"""Each record type's resolved field hints, once per process."""


def _hints(record: type) -> dict[str, Any]:
    """A record's field hints, resolved (the results modules use ``from __future__ import annotations``)."""
    if record not in _HINTS:
        _HINTS[record] = typing.get_type_hints(record)
    return _HINTS[record]


def _member(value: Any, members: tuple[Any, ...], *, reading: bool = False) -> Any:
    """The member of a union a value belongs to: ``None`` to ``NoneType``, else the one other member (vramsim's
    unions are ``X | None``); a union of two records or containers is not stored."""
    if value is None and type(None) in members:
        return type(None)
    others = [member for member in members if member is not type(None)]
    if len(others) != 1:
        raise (TypeError if reading else Unencodable)(f"the union {members} cannot be stored")
    return others[0]


def _item_hint(args: tuple[Any, ...], index: int) -> Any:
    """``list[X]`` and ``tuple[X, ...]``: X; ``tuple[X, Y]``: the index's."""
    if len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis):
        return args[0]
    if index >= len(args):
        raise TypeError(f"a tuple of {len(args)} has no item {index}")
    return args[index]


def _json_only(value: Any) -> Any:
    """A value under ``Any``: JSON's own types only (a tuple there would read back as a list)."""
    if isinstance(value, _SCALARS):
        return value
    if type(value) is list:
        return [_json_only(item) for item in value]
    if type(value) is dict and all(type(key) is str for key in value):
        return {key: _json_only(item) for key, item in value.items()}
    raise Unencodable(f"{type(value).__name__} under Any")


def _wrong(data: Any, hint: Any) -> Any:
    raise TypeError(f"{type(data).__name__} where {hint} is hinted")
