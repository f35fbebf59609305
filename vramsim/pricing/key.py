"""The key of a plan request: a sha256 digest of its canonical form, the same for the same request, new for any change.

The request is the model's config content (not its id: two ids of one config are one request), every job option as
the config holds it (defaults filled in, so giving a default explicitly changes nothing), the price sheet's content
as parsed (so the TOML's key order, whitespace, comments, ``2.50`` for ``2.5`` and ``{ days = 1 }`` for
``{ hours = 24 }`` change nothing, while its path is no part of it) and the duration's inputs. Each is written by
the one canonical writer of requests (``vramsim/cache/keys.py``: exact decimals, a file by its content), then
hashed. Where that writer cannot write a part out exactly (a model object, a lambda), the result cache traces the
request again; a plan still needs a key, so such a part is named (a module by its architecture, a function by its
name and source).

An order's key (``order_key``) adds the offer and the GPU count to the request's: it is what a user would pass to
a provider's purchase API as its idempotency key when retrying that same order, and never for another one.
vramsim buys nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vramsim.cache.keys import Unkeyable, canonical, digest, model_content, option_fields
from vramsim.config import SimulationConfig

from .sheet import Offer, PriceSheet

if TYPE_CHECKING:
    from vramsim.workload.models import ModelSource

__all__ = ["order_key", "plan_key"]


def plan_key(model: ModelSource, options: Mapping[str, Any], sheet: PriceSheet, duration: Mapping[str, Any]) -> str:
    """The digest (sha256, hex) of the request to plan ``model`` with ``options`` over ``sheet`` for ``duration``
    (the duration's inputs: ``tokens``, ``days``, ``hours``, ``mfu``, ``max_gpus``, ``stop_after_hours``, as given;
    ``None`` for one not given)."""
    config = SimulationConfig.from_options(**options)
    try:
        content = model_content(model, trust_remote_code=config.trust_remote_code)
    except Unkeyable:  # a module, a builder function: named as it is known
        content = {"stand_in": _named(model)}
    request = {
        "options": option_fields(config),
        "sheet": {"currency": sheet.currency, "offers": [_offer(offer) for offer in sheet.offers]},
        "duration": dict(duration),
    }
    return digest({"model": content, "request": canonical(request, stand_in=_named)})


def order_key(request_key: str, offer: str, gpus: int) -> str:
    """The key of one order of a plan: ``gpus`` of the offer called ``offer``, for the request ``request_key``."""
    return digest(canonical({"request": request_key, "offer": offer, "gpus": gpus}))


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


def _named(value: Any) -> str:
    """A part no key can write out exactly, as a plan's key still names it: a module by its architecture as torch
    prints it, a function by its qualified name and (where Python can read it) its source."""
    if callable(getattr(value, "named_parameters", None)):
        return repr(value)
    name = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    try:
        return f"{name}\n{inspect.getsource(value)}"
    except (OSError, TypeError):
        return name
