"""A price sheet the user owns: its offers, as frozen records (``load.py`` reads them from TOML or JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from vramsim.errors import ConfigError
from vramsim.estimators.devices import DeviceProfile

from .periods import Period

__all__ = ["INTERCONNECTS", "Interconnect", "Offer", "Option", "PriceSheet"]

Interconnect = Literal["nvlink", "pcie", "infiniband"]
INTERCONNECTS: tuple[Interconnect, ...] = ("nvlink", "pcie", "infiniband")


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """An extra an order can carry (storage, a support tier, egress...), for the whole order, not per GPU."""

    name: str
    prices: dict[Period, Decimal] = field(default_factory=dict)
    """Per period, billed like the GPUs over the job's duration; empty for a one-off."""
    once: Decimal | None = None
    """A one-off price; ``None`` for one billed per period."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer:
    """One rentable offer: a GPU model at a provider, how many there are, and what they cost."""

    name: str
    """The offer's key in the sheet, unique there."""
    provider: str
    gpu: str
    """As the sheet writes it: a catalog name or ``custom:<memory>:<arch>``."""
    device: DeviceProfile
    gpus_per_node: int
    nodes: int
    """Nodes available."""
    interconnect: Interconnect
    prices: dict[Period, Decimal]
    """Per GPU per period; at least one period."""
    minimum_hours: int = 0
    """The minimum commitment: a shorter job is billed for this long."""
    options: tuple[Option, ...] = ()
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """Dense peaks by dtype the sheet gives for this GPU, in place of the catalog's (``estimators/throughput.py``)."""
    currency: str
    sheet: str
    """The sheet it comes from (its path): every quote says the prices are the sheet's."""

    @property
    def gpus_available(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceSheet:
    """Every offer of one sheet, in the sheet's order."""

    source: str
    currency: str
    offers: tuple[Offer, ...]

    def offer(self, name: str) -> Offer:
        """The offer called ``name``; a ConfigError naming the sheet's offers otherwise."""
        for offer in self.offers:
            if offer.name == name:
                return offer
        raise ConfigError(f"no offer {name!r} in {self.source}; it has: {', '.join(o.name for o in self.offers)}")
