"""The catalog of target devices (``vramsim gpus``): columns sized to their contents, so that it fits 80 columns
with no cell wrapped and no line padded."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from vramsim.views.units import format_bytes

__all__ = ["render_devices"]

_HEADER = ("name", "device", "memory", "arch", "bf16", "fp8", "SMs")
_RIGHT = frozenset({"memory", "SMs"})
_GROUPS = {"host": "host", "datacenter": "data centre", "workstation": "workstation", "consumer": "consumer"}
_BRANDS = ("NVIDIA ", "AMD ", "GeForce ")
"""Words the driver's name starts with that the sections already tell (vendor, consumer line)."""


def render_devices(console: Console) -> None:
    """The catalog, one section per segment: what ``total_memory`` reports, the architecture the
    emulation follows, bf16/fp8 support, SM (or CU) count, and whether the memory is an estimate."""
    from vramsim.estimators.devices import DEVICES

    sections: dict[str, list[tuple[str, ...]]] = {}
    for profile in DEVICES.values():
        heading = _GROUPS[profile.segment] + (", AMD" if profile.vendor == "amd" else "")
        memory = format_bytes(profile.memory_bytes) if profile.memory_bytes else "host RAM"
        arch = profile.gfx_arch or (
            f"sm_{profile.compute_capability[0]}{profile.compute_capability[1]}"
            if profile.compute_capability
            else profile.architecture
        )
        sections.setdefault(heading, []).append(
            (
                profile.name,
                _device_name(profile.label),
                memory + (" *" if profile.memory_source.startswith("estimate") else "  "),  # the figures aligned
                arch,
                "yes" if profile.supports_bf16 else "no",
                "yes" if profile.supports_fp8 else "no",
                str(profile.multiprocessors or "-"),
            )
        )
    rows = [row for section in sections.values() for row in section]
    widths = [max(len(cells[i]) for cells in (_HEADER, *rows)) for i in range(len(_HEADER))]
    gap = 2 if sum(widths) + 2 * (len(widths) - 1) <= console.width else 1
    console.print(Text("Target devices (--device NAME)", style="bold"))
    console.print(Text(_line(_HEADER, widths, gap), style="bold"))
    for heading, section in sections.items():
        console.print(Text(heading, style="bold"))
        for row in section:
            console.print(_line(row, widths, gap), markup=False, highlight=False)
    console.print("device: the driver's name less its brand; SMs: multiprocessors (CUs on AMD)")
    console.print("* estimated from a sibling card's driver reservation (no reported figure found)")
    console.print("sources: vramsim.estimators.devices")


def _device_name(label: str) -> str:
    for brand in _BRANDS:
        label = label.removeprefix(brand)
    return "PyTorch CPU backend" if label.startswith("Host CPU") else label


def _line(cells: tuple[str, ...], widths: list[int], gap: int) -> str:
    """One row, ``gap`` spaces between columns, numbers right-aligned, nothing after the last character."""
    padded = [cell.rjust(w) if name in _RIGHT else cell.ljust(w) for name, cell, w in zip(_HEADER, cells, widths, strict=True)]
    return (" " * gap).join(padded).rstrip()
