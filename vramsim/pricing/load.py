"""Read a price sheet (TOML, or the same shape as JSON) into ``PriceSheet``: every field checked once.

Numbers are read as ``decimal.Decimal`` (``parse_float``), so a price of 2.49 is 2.49 exactly, never a float. A bad
sheet is one ConfigError line naming the sheet, the offer and the field::

    currency = "USD"
    [[offer]]
    name = "h100x8"            # unique in the sheet
    provider = "Example Cloud"
    gpu = "h100-sxm"           # a catalog name (vramsim gpus) or custom:<memory>:<arch>
    gpus_per_node = 8
    nodes = 2                  # nodes available
    interconnect = "nvlink"    # nvlink, pcie or infiniband
    minimum = { days = 7 }     # optional: the minimum commitment, in hours, days, weeks or months
    peak_tflops = { bfloat16 = 989.5 }   # optional: dense peaks for a GPU the catalog has none for
    [offer.price]              # per GPU; any of hour, day, week (7 days), month (30 days)
    hour = 2.5
    week = 350
    [[offer.option]]           # optional, for the whole order: per period (a price table) or once
    name = "storage 2 TB"
    price = { month = 40 }
"""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

from vramsim.errors import ConfigError
from vramsim.estimators.devices import get_device

from .periods import Period
from .sheet import INTERCONNECTS, Offer, Option, PriceSheet

__all__ = ["load_sheet", "parse_sheet"]

_REQUIRED = ("name", "provider", "gpu", "gpus_per_node", "nodes", "interconnect", "price")
_OPTIONAL = ("minimum", "option", "peak_tflops")
_DTYPES = ("float32", "float16", "bfloat16")
_MINIMUM_UNITS = {"hours": 1, "days": 24, "weeks": 7 * 24, "months": 30 * 24}


def load_sheet(path: str | Path) -> PriceSheet:
    """The price sheet at ``path`` (``.toml`` or ``.json``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the price sheet {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text, parse_float=Decimal)
        elif path.suffix.lower() == ".json":
            data = json.loads(text, parse_float=Decimal)
        else:
            raise ConfigError(f"a price sheet is a .toml or .json file; got {path}")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not valid {path.suffix[1:].upper()}: {exc}") from exc
    return parse_sheet(data, str(path))


def parse_sheet(data: Any, source: str) -> PriceSheet:
    """A sheet from its parsed TOML/JSON ``data``; ``source`` names it in errors and quotes."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a price sheet is a table with currency and [[offer]] entries")
    _no_unknown(data, ("currency", "offer"), source)
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not currency.strip():
        raise ConfigError(f"{source}: currency must be a name such as USD or EUR; got {currency!r}")
    entries = data.get("offer")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{source}: the sheet has no offers; add [[offer]] entries (examples/prices.example.toml)")
    offers = tuple(_offer(entry, index, currency, source) for index, entry in enumerate(entries, 1))
    seen: set[str] = set()
    for offer in offers:
        if offer.name in seen:
            raise ConfigError(f"{source}: offer {offer.name!r}: name: another offer has the same name; names are unique")
        seen.add(offer.name)
    return PriceSheet(source=source, currency=currency, offers=offers)


def _offer(entry: Any, index: int, currency: str, source: str) -> Offer:
    where = f"{source}: offer #{index}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: an offer is a table ([[offer]])")
    if isinstance(entry.get("name"), str):
        where = f"{source}: offer {entry['name']!r}"
    _no_unknown(entry, _REQUIRED + _OPTIONAL, where)
    for name in _REQUIRED:
        if name not in entry:
            raise ConfigError(f"{where}: {name}: missing; an offer gives {', '.join(_REQUIRED)}")
    interconnect = _text(entry, "interconnect", where).lower()
    if interconnect not in INTERCONNECTS:
        raise ConfigError(f"{where}: interconnect: {interconnect!r} is none of {', '.join(INTERCONNECTS)}")
    gpu = _text(entry, "gpu", where)
    try:
        device = get_device(gpu)
    except ConfigError as exc:
        raise ConfigError(f"{where}: gpu: {exc}") from exc
    if device.vendor == "cpu":
        raise ConfigError(f"{where}: gpu: the cpu is no GPU to rent; name a GPU (vramsim gpus lists them)")
    return Offer(
        name=_text(entry, "name", where),
        provider=_text(entry, "provider", where),
        gpu=gpu,
        device=device,
        gpus_per_node=_count(entry, "gpus_per_node", where),
        nodes=_count(entry, "nodes", where),
        interconnect=interconnect,  # type: ignore[arg-type]
        prices=_prices(entry["price"], f"{where}: price"),
        minimum_hours=_minimum(entry.get("minimum", {}), f"{where}: minimum"),
        options=tuple(_option(item, i, f"{where}: option") for i, item in enumerate(_list(entry, "option", where), 1)),
        peak_tflops=_peaks(entry.get("peak_tflops", {}), f"{where}: peak_tflops"),
        currency=currency,
        sheet=source,
    )


def _option(item: Any, index: int, where: str) -> Option:
    if not isinstance(item, dict):
        raise ConfigError(f"{where} #{index}: an option is a table ([[offer.option]])")
    where = f"{where} {item['name']!r}" if isinstance(item.get("name"), str) else f"{where} #{index}"
    _no_unknown(item, ("name", "price", "once"), where)
    if "name" not in item:
        raise ConfigError(f"{where}: name: missing")
    if ("price" in item) == ("once" in item):
        raise ConfigError(f"{where}: give either price (per period, e.g. price = {{ month = 40 }}) or once (a one-off)")
    name = _text(item, "name", where)
    if "once" in item:
        return Option(name=name, once=_money(item["once"], f"{where}: once"))
    return Option(name=name, prices=_prices(item["price"], f"{where}: price"))


def _prices(table: Any, where: str) -> dict[Period, Decimal]:
    """Per-period prices: at least one, each a known period and a price of 0 or more."""
    periods = ", ".join(Period)
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{where}: a table of prices per period, any of {periods} (e.g. {{ hour = 2.5 }})")
    prices: dict[Period, Decimal] = {}
    for key, value in table.items():
        if key not in tuple(Period):
            raise ConfigError(f"{where}: unknown period {key!r}; choose any of: {periods}")
        prices[Period(key)] = _money(value, f"{where}.{key}")
    return prices


def _money(value: Any, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ConfigError(f"{where}: a price is a number; got {value!r}")
    price = Decimal(value)
    if not price.is_finite() or price < 0:
        raise ConfigError(f"{where}: a price is 0 or more; got {value}")
    return price


def _minimum(table: Any, where: str) -> int:
    """The minimum commitment in whole hours."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: a table such as {{ days = 7 }} ({', '.join(_MINIMUM_UNITS)})")
    hours = Decimal(0)
    for key, value in table.items():
        if key not in _MINIMUM_UNITS:
            raise ConfigError(f"{where}: unknown unit {key!r}; choose any of: {', '.join(_MINIMUM_UNITS)}")
        if isinstance(value, bool) or not isinstance(value, int | Decimal) or value < 0:
            raise ConfigError(f"{where}.{key}: a number of {key}, 0 or more; got {value!r}")
        hours += Decimal(value) * _MINIMUM_UNITS[key]
    if hours != hours.to_integral_value():
        raise ConfigError(f"{where}: the minimum is {hours} hours; billing counts whole hours")
    return int(hours)


def _peaks(table: Any, where: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: a table of dense TFLOPS by dtype, any of {', '.join(_DTYPES)}")
    peaks: dict[str, float] = {}
    for key, value in table.items():
        if key not in _DTYPES:
            raise ConfigError(f"{where}: unknown dtype {key!r}; choose any of: {', '.join(_DTYPES)}")
        if isinstance(value, bool) or not isinstance(value, int | Decimal) or value <= 0:
            raise ConfigError(f"{where}.{key}: dense TFLOPS, more than 0; got {value!r}")
        peaks[key] = float(value)
    return peaks


def _text(entry: dict[str, Any], name: str, where: str) -> str:
    value = entry[name]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {name}: a non-empty string; got {value!r}")
    return value.strip()


def _count(entry: dict[str, Any], name: str, where: str) -> int:
    value = entry[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {name}: a whole number, 1 or more; got {value!r}")
    return value


def _list(entry: dict[str, Any], name: str, where: str) -> list[Any]:
    value = entry.get(name, [])
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {name}: a list of tables ([[offer.{name}]])")
    return value


def _no_unknown(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [key for key in table if key not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are: {', '.join(known)}")
