"""The target catalog: every device vramsim can simulate, with the facts a memory model needs.

``memory_bytes`` is what ``torch.cuda.get_device_properties(i).total_memory`` reports, which is
less than the marketing figure and a few hundred MiB less than ``nvidia-smi``'s total: the driver
keeps some back. The value moves by a few MiB between driver releases; each profile's
``memory_source`` says where its figure was seen. Figures printed by
``_CudaDeviceProperties(..., total_memory=NMB)`` are MiB (``total_memory // 2**20``).

Names are matched case-insensitively, ignoring spaces, ``-`` and ``_`` (``"H100 SXM"``,
``"h100_sxm"`` and ``"h100-sxm"`` are the same). Aliases:

    h100, h100-80gb           -> h100-sxm
    a100                      -> a100-80gb
    v100                      -> v100-32gb
    h200-141gb                -> h200
    3090, 4090, 5090          -> rtx-3090, rtx-4090, rtx-5090
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from vramsim.errors import ConfigError

__all__ = ["ALIASES", "DEVICES", "Architecture", "DeviceProfile", "Vendor", "device_names", "get_device"]

Vendor = Literal["nvidia", "amd", "cpu"]
Architecture = Literal["cpu", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3"]

_MiB = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceProfile:
    """One simulation target: the facts that decide what its memory can hold."""

    name: str
    """Catalog key, lower case (``"h100-sxm"``)."""
    label: str
    """Human name, close to what ``torch.cuda.get_device_name()`` prints."""
    vendor: Vendor
    architecture: Architecture
    """GPU generation; the CUDA context and cuBLAS workspace sizes depend on it."""
    memory_bytes: int | None
    """``total_memory`` as the driver reports it; ``None`` for the cpu, whose capacity is host RAM."""
    memory_source: str
    """Where ``memory_bytes`` was seen, or how it was estimated."""
    compute_capability: tuple[int, int] | None = None
    """NVIDIA ``(major, minor)``; ``None`` elsewhere."""
    gfx_arch: str | None = None
    """AMD ISA name (``"gfx942"``); ``None`` elsewhere."""
    supports_bf16: bool
    """Native bf16 arithmetic (Ampere+ on NVIDIA); Volta and Turing only emulate it."""
    supports_fp8: bool
    """Native fp8 matmul (Ada, Hopper, Blackwell, CDNA3)."""


def _nvidia(
    name: str,
    label: str,
    architecture: Architecture,
    capability: tuple[int, int],
    memory_mib: int,
    memory_source: str,
) -> DeviceProfile:
    """A CUDA profile whose bf16/fp8 support follows from its compute capability."""
    return DeviceProfile(
        name=name,
        label=label,
        vendor="nvidia",
        architecture=architecture,
        memory_bytes=memory_mib * _MiB,
        memory_source=memory_source,
        compute_capability=capability,
        supports_bf16=capability >= (8, 0),
        supports_fp8=capability >= (8, 9),
    )


_PROFILES: tuple[DeviceProfile, ...] = (
    DeviceProfile(
        name="cpu",
        label="Host CPU (PyTorch CPU backend)",
        vendor="cpu",
        architecture="cpu",
        memory_bytes=None,
        memory_source="host RAM; not a catalog fact",
        supports_bf16=True,
        supports_fp8=False,
    ),
    _nvidia("a100-40gb", "NVIDIA A100-SXM4-40GB", "ampere", (8, 0), 40_536,
            "_CudaDeviceProperties(name='A100-SXM4-40GB', total_memory=40536MB) in public logs"),
    _nvidia("a100-80gb", "NVIDIA A100-SXM4-80GB", "ampere", (8, 0), 81_254,
            "A100 80GB OOM message '79.35 GiB total capacity' (+-5 MiB from the 2-decimal rounding)"),
    _nvidia("h100-sxm", "NVIDIA H100 80GB HBM3 (SXM)", "hopper", (9, 0), 81_090,
            "_CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', total_memory=81090MB); 81082-81090 seen"),
    _nvidia("h100-pcie", "NVIDIA H100 PCIe", "hopper", (9, 0), 81_008,
            "_CudaDeviceProperties(name='NVIDIA H100 PCIe', total_memory=81008MB) in public logs"),
    _nvidia("h200", "NVIDIA H200 (141GB HBM3e)", "hopper", (9, 0), 143_156,
            "_CudaDeviceProperties(name='NVIDIA H200', total_memory=143156MB) in public logs"),
    _nvidia("b200", "NVIDIA B200", "blackwell", (10, 0), 182_631,
            "_CudaDeviceProperties(name='NVIDIA B200', total_memory=182631MB); 182642 also seen"),
    _nvidia("l4", "NVIDIA L4", "ada", (8, 9), 22_563,
            "estimate: nvidia-smi's 23034 MiB less the ~460 MiB driver share seen on A10G and L40S"),
    _nvidia("l40s", "NVIDIA L40S", "ada", (8, 9), 45_589,
            "_CudaDeviceProperties(name='NVIDIA L40S', total_memory=45589MB) in public logs"),
    _nvidia("a10g", "NVIDIA A10G", "ampere", (8, 6), 22_587,
            "_CudaDeviceProperties(name='NVIDIA A10G', total_memory=22587MB) in public logs"),
    _nvidia("t4", "Tesla T4", "turing", (7, 5), 15_095,
            "_CudaDeviceProperties(name='Tesla T4', total_memory=15095MB); 15102-15109 with older drivers"),
    _nvidia("v100-16gb", "Tesla V100-SXM2-16GB", "volta", (7, 0), 16_160,
            "_CudaDeviceProperties(name='Tesla V100-SXM2-16GB', total_memory=16160MB) in public logs"),
    _nvidia("v100-32gb", "Tesla V100-SXM2-32GB", "volta", (7, 0), 32_510,
            "_CudaDeviceProperties(name='Tesla V100-PCIE-32GB', total_memory=32510MB); same HBM2 stack"),
    _nvidia("rtx-3090", "NVIDIA GeForce RTX 3090", "ampere", (8, 6), 24_268,
            "_CudaDeviceProperties(name='GeForce RTX 3090', total_memory=24268MB); 24259 also seen"),
    _nvidia("rtx-4090", "NVIDIA GeForce RTX 4090", "ada", (8, 9), 24_563,
            "_CudaDeviceProperties(name='NVIDIA GeForce RTX 4090', total_memory=24563MB) in public logs"),
    _nvidia("rtx-5090", "NVIDIA GeForce RTX 5090", "blackwell", (12, 0), 32_117,
            "RTX 5090 OOM messages 'total capacity of 31.36 GiB' / '31.37 GiB' (+-5 MiB)"),
    DeviceProfile(
        name="mi300x",
        label="AMD Instinct MI300X",
        vendor="amd",
        architecture="cdna3",
        memory_bytes=196_592 * _MiB,
        memory_source="_CudaDeviceProperties(name='AMD Instinct MI300X', total_memory=196592MB) in public logs",
        gfx_arch="gfx942",
        supports_bf16=True,
        supports_fp8=True,
    ),
)  # fmt: skip

DEVICES: dict[str, DeviceProfile] = {profile.name: profile for profile in _PROFILES}
"""Every profile by catalog key, in catalog order."""

ALIASES: dict[str, str] = {
    "h100": "h100-sxm",
    "h100-80gb": "h100-sxm",
    "a100": "a100-80gb",
    "v100": "v100-32gb",
    "h200-141gb": "h200",
    "3090": "rtx-3090",
    "4090": "rtx-4090",
    "5090": "rtx-5090",
}
"""Short names users type, mapped to the catalog key they mean."""


def _fold(name: str) -> str:
    """The matching form of a name: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


_LOOKUP: dict[str, str] = {_fold(key): key for key in DEVICES} | {_fold(alias): key for alias, key in ALIASES.items()}


def device_names() -> list[str]:
    """Catalog keys in catalog order, for help texts and ``vramsim gpus``."""
    return list(DEVICES)


def get_device(name: str) -> DeviceProfile:
    """The profile called ``name`` (any case, spacing or alias), or a ConfigError listing the choices."""
    key = _LOOKUP.get(_fold(name))
    if key is not None:
        return DEVICES[key]
    close = difflib.get_close_matches(_fold(name), _LOOKUP, n=1)
    hint = f" (did you mean {_LOOKUP[close[0]]!r}?)" if close else ""
    aliases = ", ".join(f"{alias}={key}" for alias, key in ALIASES.items())
    raise ConfigError(f"unknown device {name!r}{hint}; choose one of: {', '.join(DEVICES)} (aliases: {aliases})")
