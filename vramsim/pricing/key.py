"""The key of a plan request: a sha256 digest of its canonical form, the same for the same request, new for any change.

The request is the model's config content (not its id: two ids of one config are one request), every job option as
the config holds it (defaults filled in, so giving a default explicitly changes nothing), the price sheet's content
as parsed (so the TOML's key order, whitespace, comments, ``2.50`` for ``2.5`` and ``{ days = 1 }`` for
``{ hours = 24 }`` change nothing, while its path is no part of it) and the duration's inputs. Each is written as
JSON with sorted keys and exact decimals, then hashed.

An order's key (``order_key``) adds the offer and the GPU count to the request's: it is what a user would pass to
a provider's purchase API as its idempotency key when retrying that same order, and never for another one.
vramsim buys nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import inspect
import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramsim.config import SimulationConfig

from .sheet import Offer, PriceSheet

if TYPE_CHECKING:
    from vramsim.workload.models import ModelSource

__all__ = ["order_key", "plan_key"]


def plan_key(model: ModelSource, options: Mapping[str, Any], sheet: PriceSheet, duration: Mapping[str, Any]) -> str:
    """The digest (sha256, hex) of the request to plan ``model`` with ``options`` over ``sheet`` for ``duration``
    (the duration's inputs: ``tokens``, ``days``, ``hours``, ``mfu``, as given; ``None`` for one not given)."""
    config = SimulationConfig.from_options(**options)
    request = {
        "model": _model_content(model, trust_remote_code=config.trust_remote_code),
        "options": {field.name: getattr(config, field.name) for field in dataclasses.fields(config) if field.init},
        "sheet": {"currency": sheet.currency, "offers": [_offer(offer) for offer in sheet.offers]},
        "duration": dict(duration),
    }
    return _digest(request)


def order_key(request_key: str, offer: str, gpus: int) -> str:
    """The key of one order of a plan: ``gpus`` of the offer called ``offer``, for the request ``request_key``."""
    return _digest({"request": request_key, "offer": offer, "gpus": gpus})


def _digest(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _model_content(model: ModelSource, *, trust_remote_code: bool) -> Any:
    """What the model is: its config's content, or a module's architecture as torch prints it."""
    if isinstance(model, str | Path):
        from vramsim.workload.models import load_config  # torch: only once a key is asked for

        return load_config(model, trust_remote_code=trust_remote_code).to_dict()
    if callable(getattr(model, "to_dict", None)):  # a transformers config
        return model.to_dict()  # type: ignore[union-attr,operator]
    if callable(getattr(model, "named_parameters", None)):  # a module
        return repr(model)
    return _function(model)  # type: ignore[arg-type]


def _offer(offer: Offer) -> dict[str, Any]:
    """An offer's content as the sheet gives it; its device by name (the catalog's or ``custom:...``)."""
    return {
        "name": offer.name,
        "provider": offer.provider,
        "gpu": offer.device.name,
        "gpus_per_node": offer.gpus_per_node,
        "nodes": offer.nodes,
        "interconnect": offer.interconnect,
        "prices": {str(period): price for period, price in offer.prices.items()},
        "minimum_hours": offer.minimum_hours,
        "options": [{"name": o.name, "prices": {str(p): v for p, v in o.prices.items()}, "once": o.once} for o in offer.options],
        "peak_tflops": offer.peak_tflops,
    }


def _function(function: Callable[..., Any]) -> str:
    """A user's function by its qualified name and, where Python can read it, its source."""
    name = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', type(function).__name__)}"
    try:
        return f"{name}\n{inspect.getsource(function)}"
    except (OSError, TypeError):
        return name


def _canonical(value: Any) -> Any:
    """``value`` as JSON data with one spelling per meaning: decimals exact and normalised (2.50 is 2.5, 60.0 is
    60), mappings by string key, tuples as lists, dtypes and enums by name, functions by name and source."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | Decimal):
        number = Decimal(value) if not isinstance(value, float) else Decimal(repr(value))
        return format(number.normalize(), "f") if number.is_finite() else str(number)
    if isinstance(value, enum.Enum):
        return _canonical(value.value)
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_canonical(item) for item in value]
        return sorted(items, key=json.dumps) if isinstance(value, set | frozenset) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _canonical({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, Path) or type(value).__module__ == "torch":  # a path, a dtype
        return str(value)
    if callable(value):
        return _function(value)
    return str(value)
