"""The catalog of target devices (``vramsim gpus``) as a table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vramsim.views.units import format_bytes

__all__ = ["render_devices"]


def render_devices(console: Console) -> None:
    """The catalog, one section per segment: what ``total_memory`` reports, the architecture the
    emulation follows, bf16/fp8 support, SM (or CU) count, and whether the memory is an estimate."""
    from vramsim.estimators.devices import DEVICES

    table = Table(title="Target devices (--device NAME)", title_justify="left")
    for name in ("name", "device", "total_memory", "arch", "bf16", "fp8", "SMs/CUs"):
        header = {"total_memory": "total\nmemory", "SMs/CUs": "SMs/\nCUs"}.get(name, name)  # narrow: 80 columns
        table.add_column(
            header, justify="right" if name in ("total_memory", "SMs/CUs") else "left", no_wrap=name != "device", overflow="fold"
        )
    groups = {"host": "host", "datacenter": "data centre", "workstation": "workstation", "consumer": "consumer"}
    group = ""
    for profile in DEVICES.values():
        heading = groups[profile.segment] + (", AMD" if profile.vendor == "amd" else "")
        if heading != group:
            if group:
                table.add_section()
            table.add_row(Text(heading, style="bold"))
            group = heading
        memory = format_bytes(profile.memory_bytes) if profile.memory_bytes else "host RAM"
        if profile.memory_source.startswith("estimate"):
            memory += " *"
        arch = profile.gfx_arch or (
            f"sm_{profile.compute_capability[0]}{profile.compute_capability[1]}"
            if profile.compute_capability
            else profile.architecture
        )
        table.add_row(
            profile.name,
            profile.label,
            memory,
            arch,
            "yes" if profile.supports_bf16 else "no",
            "yes" if profile.supports_fp8 else "no",
            str(profile.multiprocessors or "-"),
        )
    console.print(table)
    console.print(
        "* estimated from a sibling card's driver reservation (no reported figure found); sources: vramsim.estimators.devices"
    )
