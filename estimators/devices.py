"""The target catalog: every device vramsim can simulate, with the facts a memory model needs.

``memory_bytes`` is what ``torch.cuda.get_device_properties(i).total_memory`` reports, which is
less than the marketing figure and a few hundred MiB less than ``nvidia-smi``'s total: the driver
keeps some back. The value moves by a few MiB between driver releases; each profile's
``memory_source`` says where its figure was seen. Figures printed by
``_CudaDeviceProperties(..., total_memory=NMB)`` and deviceQuery's "MBytes" are MiB; an OOM
message's "total capacity of X GiB" pins it to +-5 MiB. Where no reported figure was found the
source starts with "estimate" and names its rule, mostly: the marketed size less the driver
reservation (marketed MiB minus reported MiB) measured on the nearest-sized card of the same
generation.
On ROCm, ``total_memory`` is the VRAM pool rocminfo lists (16 MiB under the full size on MI210
and MI300X).

``multiprocessors`` is ``multi_processor_count``: SMs on NVIDIA, compute units on AMD (one GCD
of an MI250X, as ROCm exposes each die as its own device), from the vendors' spec sheets and
deviceQuery/rocminfo/clinfo logs; the GB200's 152 is the one figure not seen in a log.

Names are matched case-insensitively, ignoring spaces, ``-`` and ``_`` (``"H100 SXM"``,
``"h100_sxm"`` and ``"h100-sxm"`` are the same); every ``rtx-...`` key also answers without its
``rtx`` (``3080ti``, ``4090``, ``a6000``). Other aliases:

    h100, h100-80gb           -> h100-sxm
    a100, a100-sxm            -> a100-80gb
    v100                      -> v100-32gb
    h200-141gb                -> h200
    ...                       (``ALIASES`` lists them all)
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from typing import Literal

from vramsim.errors import ConfigError

__all__ = [
    "ALIASES",
    "DEVICES",
    "Architecture",
    "DeviceProfile",
    "Segment",
    "Vendor",
    "device_names",
    "get_device",
    "match_reported_name",
]

Vendor = Literal["nvidia", "amd", "cpu"]
Architecture = Literal["cpu", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4"]
Segment = Literal["host", "datacenter", "workstation", "consumer"]

_MiB = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceProfile:
    """One simulation target: the facts that decide what its memory can hold."""

    name: str
    """Catalog key, lower case (``"h100-sxm"``)."""
    label: str
    """What ``torch.cuda.get_device_name()`` prints (the cpu's is descriptive)."""
    vendor: Vendor
    segment: Segment
    """Where the card is sold: data-centre, workstation or consumer; ``vramsim gpus`` groups by it."""
    architecture: Architecture
    """GPU generation; the CUDA context and cuBLAS workspace sizes depend on it."""
    memory_bytes: int | None
    """``total_memory`` as the driver reports it; ``None`` for the cpu, whose capacity is host RAM."""
    memory_source: str
    """Where ``memory_bytes`` was seen, or how it was estimated."""
    multiprocessors: int | None = None
    """``multi_processor_count``: SMs (NVIDIA) or compute units (AMD); ``None`` for the cpu."""
    compute_capability: tuple[int, int] | None = None
    """NVIDIA ``(major, minor)``; ``None`` elsewhere."""
    gfx_arch: str | None = None
    """AMD ISA name (``"gfx942"``); ``None`` elsewhere."""
    supports_bf16: bool
    """Native bf16 arithmetic (Ampere+ on NVIDIA, CDNA2+ on AMD); Volta and Turing only emulate it."""
    supports_fp8: bool
    """Native fp8 matmul (Ada, Hopper, Blackwell, CDNA3, CDNA4)."""
    reported_names: tuple[str, ...] = ()
    """Every ``torch.cuda.get_device_name()`` string this card is known to print; ``label`` first."""


def _nvidia(
    name: str,
    label: str,
    segment: Segment,
    architecture: Architecture,
    capability: tuple[int, int],
    multiprocessors: int,
    memory_mib: int,
    memory_source: str,
    *also_reported: str,
) -> DeviceProfile:
    """A CUDA profile whose bf16/fp8 support follows from its compute capability."""
    return DeviceProfile(
        name=name,
        label=label,
        vendor="nvidia",
        segment=segment,
        architecture=architecture,
        memory_bytes=memory_mib * _MiB,
        memory_source=memory_source,
        multiprocessors=multiprocessors,
        compute_capability=capability,
        supports_bf16=capability >= (8, 0),
        supports_fp8=capability >= (8, 9),
        reported_names=(label, *also_reported),
    )


def _amd(
    name: str, label: str, architecture: Architecture, gfx_arch: str, compute_units: int, memory_mib: int, memory_source: str
) -> DeviceProfile:
    """A ROCm Instinct profile: bf16 from CDNA2 on, fp8 from CDNA3 on."""
    return DeviceProfile(
        name=name,
        label=label,
        vendor="amd",
        segment="datacenter",
        architecture=architecture,
        memory_bytes=memory_mib * _MiB,
        memory_source=memory_source,
        multiprocessors=compute_units,
        gfx_arch=gfx_arch,
        supports_bf16=True,
        supports_fp8=architecture != "cdna2",
        reported_names=(label,),
    )


_ESTIMATE = "estimate: {marketed} MiB less the {reserved} MiB the driver keeps on the {sibling}"


def _estimate(marketed_mib: int, reserved_mib: int, sibling: str) -> tuple[int, str]:
    """``(memory_mib, memory_source)`` for a card with no reported figure (see the module docstring)."""
    return marketed_mib - reserved_mib, _ESTIMATE.format(marketed=marketed_mib, reserved=reserved_mib, sibling=sibling)


# Driver reservations measured on catalog cards (marketed MiB - reported MiB), used by the estimates.
_AMPERE_8GB = 8_192 - 7_967  # RTX 3070
_AMPERE_12GB = 12_288 - 12_042  # RTX 3060 12 GB
_AMPERE_24GB = 24_576 - 24_268  # RTX 3090
_ADA_8GB = 8_192 - 7_936  # RTX 4060 8 GB (laptop, AD107)
_ADA_24GB = 24_576 - 24_207  # RTX 4090
_BLACKWELL_32GB = 32_768 - 32_117  # RTX 5090

_A100_40GB_PCIE = _estimate(40_960, 40_960 - 40_536, "A100-SXM4-40GB (same HBM2 stacks)")
_RTX_A6000 = _estimate(49_152, _AMPERE_24GB, "RTX 3090 (GA102), ECC off; with ECC on expect the A40's 45416 MiB")
_H200_NVL = _estimate(144_384, 144_384 - 143_156, "H200 (same 141 GB HBM3e)")
_RTX_8GB_AMPERE = _estimate(8_192, _AMPERE_8GB, "RTX 3070 (8 GB, GA104)")
_RTX_12GB_AMPERE = _estimate(12_288, _AMPERE_12GB, "RTX 3060 12 GB")
_RTX_3090_TI = _estimate(24_576, _AMPERE_24GB, "RTX 3090")
_RTX_8GB_ADA = _estimate(8_192, _ADA_8GB, "RTX 4060 8 GB")
_RTX_12GB_ADA = _estimate(12_288, _ADA_8GB, "RTX 4060 8 GB")
_RTX_16GB_ADA = _estimate(16_384, _ADA_24GB, "RTX 4090")
_RTX_12GB_BLACKWELL = _estimate(12_288, _BLACKWELL_32GB, "RTX 5090")
_RTX_16GB_BLACKWELL = _estimate(16_384, _BLACKWELL_32GB, "RTX 5090")

_OOM = "OOM message 'total capacity of {gib} GiB' ({where}; +-5 MiB)"

_PROFILES: tuple[DeviceProfile, ...] = (
    DeviceProfile(
        name="cpu",
        label="Host CPU (PyTorch CPU backend)",
        vendor="cpu",
        segment="host",
        architecture="cpu",
        memory_bytes=None,
        memory_source="host RAM; not a catalog fact",
        supports_bf16=True,
        supports_fp8=False,
    ),
    # -- data centre, NVIDIA ---------------------------------------------------------------------
    _nvidia(
        "v100-16gb",
        "Tesla V100-SXM2-16GB",
        "datacenter",
        "volta",
        (7, 0),
        80,
        16_160,
        "_CudaDeviceProperties(name='Tesla V100-SXM2-16GB', total_memory=16160MB) in public logs",
        "Tesla V100-PCIE-16GB",
        "Tesla V100-SXM2-16GB-LS",
    ),
    _nvidia(
        "v100-32gb",
        "Tesla V100-SXM2-32GB",
        "datacenter",
        "volta",
        (7, 0),
        80,
        32_510,
        "_CudaDeviceProperties(name='Tesla V100-PCIE-32GB', total_memory=32510MB); same HBM2 stack",
        "Tesla V100-PCIE-32GB",
        "Tesla V100S-PCIE-32GB",
        "Tesla V100-SXM3-32GB",
        "Tesla V100-DGXS-32GB",
    ),
    _nvidia(
        "t4",
        "Tesla T4",
        "datacenter",
        "turing",
        (7, 5),
        40,
        15_095,
        "_CudaDeviceProperties(name='Tesla T4', total_memory=15095MB); 15102-15110 with older drivers",
        "NVIDIA T4",
    ),
    _nvidia(
        "a10",
        "NVIDIA A10",
        "datacenter",
        "ampere",
        (8, 6),
        72,
        22_518,
        _OOM.format(gib="21.99", where="Lambda A10, zai-org/CogVLM#236"),
    ),
    _nvidia(
        "a10g",
        "NVIDIA A10G",
        "datacenter",
        "ampere",
        (8, 6),
        80,
        22_587,
        "_CudaDeviceProperties(name='NVIDIA A10G', total_memory=22587MB) in public logs",
    ),
    _nvidia(
        "a30",
        "NVIDIA A30",
        "datacenter",
        "ampere",
        (8, 0),
        56,
        24_095,
        _OOM.format(gib="23.53", where="'only 24G in A30', google/RB-Modulation#5"),
    ),
    _nvidia(
        "a40",
        "NVIDIA A40",
        "datacenter",
        "ampere",
        (8, 6),
        84,
        45_416,
        "cudaDeviceProp totalGlobalMem 47622258688 B, ECC on (pyscf/gpu4pyscf#304)",
    ),
    _nvidia(
        "a100-40gb",
        "NVIDIA A100-SXM4-40GB",
        "datacenter",
        "ampere",
        (8, 0),
        108,
        40_536,
        "_CudaDeviceProperties(name='A100-SXM4-40GB', total_memory=40536MB) in public logs; drivers >= 535 report 40339-40448",
        "A100-SXM4-40GB",
    ),
    _nvidia("a100-40gb-pcie", "NVIDIA A100-PCIE-40GB", "datacenter", "ampere", (8, 0), 108, *_A100_40GB_PCIE),
    _nvidia(
        "a100-80gb",
        "NVIDIA A100-SXM4-80GB",
        "datacenter",
        "ampere",
        (8, 0),
        108,
        81_254,
        "A100 80GB OOM message '79.35 GiB total capacity' (+-5 MiB from the 2-decimal rounding)",
        "A100-SXM4-80GB",
        "NVIDIA A100-SXM-80GB",
    ),
    _nvidia(
        "a100-80gb-pcie",
        "NVIDIA A100 80GB PCIe",
        "datacenter",
        "ampere",
        (8, 0),
        108,
        81_049,
        "mixbench 'Total global mem: 81049 MB' on an NVIDIA A100 80GB PCIe, driver 12.3 (ekondis/mixbench#47)",
    ),
    _nvidia(
        "l4",
        "NVIDIA L4",
        "datacenter",
        "ada",
        (8, 9),
        58,
        22_563,
        "estimate: nvidia-smi's 23034 MiB less the ~460 MiB driver share seen on A10G and L40S",
    ),
    _nvidia(
        "l40",
        "NVIDIA L40",
        "datacenter",
        "ada",
        (8, 9),
        142,
        45_466,
        _OOM.format(gib="44.40", where="one L40, QwenLM/Qwen3-VL#2097"),
    ),
    _nvidia(
        "l40s",
        "NVIDIA L40S",
        "datacenter",
        "ada",
        (8, 9),
        142,
        45_589,
        "_CudaDeviceProperties(name='NVIDIA L40S', total_memory=45589MB); 44.42 GiB also seen (stepfun-ai/Step-Video-T2V#8)",
    ),
    _nvidia(
        "h20",
        "NVIDIA H20",
        "datacenter",
        "hopper",
        (9, 0),
        78,
        97_280,
        _OOM.format(gib="95.00", where="H20 96G, modelscope/DiffSynth-Studio#1238"),
    ),
    _nvidia(
        "h100-pcie",
        "NVIDIA H100 PCIe",
        "datacenter",
        "hopper",
        (9, 0),
        114,
        81_008,
        "_CudaDeviceProperties(name='NVIDIA H100 PCIe', total_memory=81008MB) in public logs",
    ),
    _nvidia(
        "h100-sxm",
        "NVIDIA H100 80GB HBM3",
        "datacenter",
        "hopper",
        (9, 0),
        132,
        81_090,
        "_CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', total_memory=81090MB); 81082-81090 seen",
        "NVIDIA H100",
    ),
    _nvidia(
        "h100-nvl",
        "NVIDIA H100 NVL",
        "datacenter",
        "hopper",
        (9, 0),
        132,
        95_232,
        _OOM.format(gib="93.00", where="H100 NVL 94GB on RunPod, ali-vilab/VACE#56"),
    ),
    _nvidia(
        "gh200",
        "NVIDIA GH200 480GB",
        "datacenter",
        "hopper",
        (9, 0),
        132,
        97_157,
        _OOM.format(gib="94.88", where="GH200 96 GB HBM3, nvidia-smi 97871 MiB, Lightning-AI/litgpt#1892"),
    ),
    _nvidia(
        "h200",
        "NVIDIA H200",
        "datacenter",
        "hopper",
        (9, 0),
        132,
        143_156,
        "total_memory = 150,109,880,320 B measured on an H200, driver 580.159.04 (nvidia-smi 143771 MiB); "
        "_CudaDeviceProperties(name='NVIDIA H200', total_memory=143156MB) in public logs",
    ),
    _nvidia("h200-nvl", "NVIDIA H200 NVL", "datacenter", "hopper", (9, 0), 132, *_H200_NVL),
    _nvidia(
        "b200",
        "NVIDIA B200",
        "datacenter",
        "blackwell",
        (10, 0),
        148,
        182_631,
        "_CudaDeviceProperties(name='NVIDIA B200', total_memory=182631MB); 182642 also seen",
    ),
    _nvidia(
        "gb200",
        "NVIDIA GB200",
        "datacenter",
        "blackwell",
        (10, 0),
        152,
        188_719,
        "estimate: the B200's 182631 MiB scaled by the marketed 186 GB / 180 GB per GPU",
    ),
    # -- workstation ------------------------------------------------------------------------------
    _nvidia("rtx-a6000", "NVIDIA RTX A6000", "workstation", "ampere", (8, 6), 84, *_RTX_A6000),
    _nvidia(
        "rtx-6000-ada",
        "NVIDIA RTX 6000 Ada Generation",
        "workstation",
        "ada",
        (8, 9),
        142,
        45_496,
        _OOM.format(gib="44.43", where="ECC on, nvidia-smi 46068 MiB, DINGYANB/MTVCrafter#21"),
    ),
    # -- consumer ---------------------------------------------------------------------------------
    _nvidia(
        "rtx-3060",
        "NVIDIA GeForce RTX 3060",
        "consumer",
        "ampere",
        (8, 6),
        28,
        12_042,
        _OOM.format(gib="11.76", where="RTX 3060 12 GB, TencentARC/PhotoMaker#47"),
    ),
    _nvidia("rtx-3060-ti", "NVIDIA GeForce RTX 3060 Ti", "consumer", "ampere", (8, 6), 38, *_RTX_8GB_AMPERE),
    _nvidia(
        "rtx-3070",
        "NVIDIA GeForce RTX 3070",
        "consumer",
        "ampere",
        (8, 6),
        46,
        7_967,
        _OOM.format(gib="7.78", where="RTX 3070, akshitac8/OW-DETR#46 and meta-llama/codellama#82")
        + "; 7.76 GiB with 2021 drivers (sshan-zhao/GASDA#19)",
    ),
    _nvidia("rtx-3070-ti", "NVIDIA GeForce RTX 3070 Ti", "consumer", "ampere", (8, 6), 48, *_RTX_8GB_AMPERE),
    _nvidia(
        "rtx-3080",
        "NVIDIA GeForce RTX 3080",
        "consumer",
        "ampere",
        (8, 6),
        68,
        10_015,
        _OOM.format(gib="9.78", where="RTX 3080 10 GB, zai-org/CogVideo#34"),
    ),
    _nvidia("rtx-3080-12gb", "NVIDIA GeForce RTX 3080", "consumer", "ampere", (8, 6), 70, *_RTX_12GB_AMPERE),
    _nvidia("rtx-3080-ti", "NVIDIA GeForce RTX 3080 Ti", "consumer", "ampere", (8, 6), 80, *_RTX_12GB_AMPERE),
    _nvidia(
        "rtx-3090",
        "NVIDIA GeForce RTX 3090",
        "consumer",
        "ampere",
        (8, 6),
        82,
        24_268,
        "_CudaDeviceProperties(name='GeForce RTX 3090', total_memory=24268MB); 24259 also seen",
        "GeForce RTX 3090",
    ),
    _nvidia("rtx-3090-ti", "NVIDIA GeForce RTX 3090 Ti", "consumer", "ampere", (8, 6), 84, *_RTX_3090_TI),
    _nvidia("rtx-4060-ti", "NVIDIA GeForce RTX 4060 Ti", "consumer", "ada", (8, 9), 34, *_RTX_8GB_ADA),
    _nvidia("rtx-4060-ti-16gb", "NVIDIA GeForce RTX 4060 Ti", "consumer", "ada", (8, 9), 34, *_RTX_16GB_ADA),
    _nvidia("rtx-4070", "NVIDIA GeForce RTX 4070", "consumer", "ada", (8, 9), 46, *_RTX_12GB_ADA),
    _nvidia("rtx-4070-ti", "NVIDIA GeForce RTX 4070 Ti", "consumer", "ada", (8, 9), 60, *_RTX_12GB_ADA),
    _nvidia("rtx-4070-ti-super", "NVIDIA GeForce RTX 4070 Ti SUPER", "consumer", "ada", (8, 9), 66, *_RTX_16GB_ADA),
    _nvidia("rtx-4080", "NVIDIA GeForce RTX 4080", "consumer", "ada", (8, 9), 76, *_RTX_16GB_ADA),
    _nvidia("rtx-4080-super", "NVIDIA GeForce RTX 4080 SUPER", "consumer", "ada", (8, 9), 80, *_RTX_16GB_ADA),
    _nvidia(
        "rtx-4090",
        "NVIDIA GeForce RTX 4090",
        "consumer",
        "ada",
        (8, 9),
        128,
        24_207,
        _OOM.format(gib="23.64", where="Linux, ali-vilab/VGen#104 and 3DTopia/Phidias-Diffusion#8")
        + "; 23.68 GiB with 2023 drivers (zai-org/CogVideo#36), 24563 MiB on other setups",
    ),
    _nvidia("rtx-5070", "NVIDIA GeForce RTX 5070", "consumer", "blackwell", (12, 0), 48, *_RTX_12GB_BLACKWELL),
    _nvidia("rtx-5070-ti", "NVIDIA GeForce RTX 5070 Ti", "consumer", "blackwell", (12, 0), 70, *_RTX_16GB_BLACKWELL),
    _nvidia("rtx-5080", "NVIDIA GeForce RTX 5080", "consumer", "blackwell", (12, 0), 84, *_RTX_16GB_BLACKWELL),
    _nvidia(
        "rtx-5090",
        "NVIDIA GeForce RTX 5090",
        "consumer",
        "blackwell",
        (12, 0),
        170,
        32_117,
        "deviceQuery 'Total amount of global memory: 32117 MBytes (33677180928 bytes)', driver 570.133.04 "
        "(aikitoria/open-gpu-kernel-modules#1); OOM messages 'total capacity of 31.36 GiB' / '31.37 GiB'",
    ),
    # -- data centre, AMD (ROCm) ---------------------------------------------------------------
    _amd(
        "mi210",
        "AMD Instinct MI210",
        "cdna2",
        "gfx90a",
        104,
        65_520,
        "rocminfo VRAM pool 67092480 KB (ROCm/legacy-rocm-build#3246, #3460)",
    ),
    _amd(
        "mi250x",
        "AMD Instinct MI250X/MI250",
        "cdna2",
        "gfx90a",
        110,
        65_520,
        "estimate: one GCD's 64 GiB HBM2e less the 16 MiB ROCm keeps on the MI210 (same HBM2e, gfx90a)",
    ),
    _amd(
        "mi300x",
        "AMD Instinct MI300X",
        "cdna3",
        "gfx942",
        304,
        196_592,
        "_CudaDeviceProperties(name='AMD Instinct MI300X', total_memory=196592MB) in public logs",
    ),
    _amd(
        "mi325x",
        "AMD Instinct MI325X",
        "cdna3",
        "gfx942",
        304,
        262_128,
        "estimate: 256 GiB HBM3e less the 16 MiB ROCm keeps on the MI300X",
    ),
    _amd(
        "mi355x",
        "AMD Instinct MI355X",
        "cdna4",
        "gfx950",
        256,
        294_896,
        "OOM message 'total capacity of 287.98 GiB' on gfx950 (ROCm/TheRock#2118): 288 GiB less 16 MiB as on MI300X",
    ),
)

DEVICES: dict[str, DeviceProfile] = {profile.name: profile for profile in _PROFILES}
"""Every profile by catalog key, in catalog order (host, data centre, workstation, consumer, AMD)."""

ALIASES: dict[str, str] = {
    "h100": "h100-sxm",
    "h100-80gb": "h100-sxm",
    "h100-sxm5": "h100-sxm",
    "h100-94gb": "h100-nvl",
    "a100": "a100-80gb",
    "a100-sxm": "a100-80gb",
    "a100-80gb-sxm": "a100-80gb",
    "a100-40gb-sxm": "a100-40gb",
    "a100-pcie": "a100-80gb-pcie",
    "v100": "v100-32gb",
    "h200-141gb": "h200",
    "gh200-96gb": "gh200",
    "6000-ada": "rtx-6000-ada",
    "rtx-6000-ada-generation": "rtx-6000-ada",
    "3080-10gb": "rtx-3080",
    "4060-ti-8gb": "rtx-4060-ti",
}
"""Names users type beyond the keys themselves (and the keys' ``rtx``-less forms), with the key each means."""


def _fold(name: str) -> str:
    """The matching form of a name: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _lookup() -> dict[str, str]:
    """Folded spelling -> catalog key: the keys, their ``rtx``-less forms and ``ALIASES``."""
    found = {_fold(key): key for key in DEVICES}
    found |= {_fold(key.removeprefix("rtx-")): key for key in DEVICES if key.startswith("rtx-")}
    return found | {_fold(alias): key for alias, key in ALIASES.items()}


_LOOKUP = _lookup()


def device_names() -> list[str]:
    """Catalog keys in catalog order, for help texts and ``vramsim gpus``."""
    return list(DEVICES)


_NVIDIA_ARCHITECTURES: dict[tuple[int, int], Architecture] = {
    (7, 0): "volta", (7, 2): "volta", (7, 5): "turing", (8, 0): "ampere", (8, 6): "ampere", (8, 7): "ampere",
    (8, 9): "ada", (9, 0): "hopper", (10, 0): "blackwell", (10, 3): "blackwell", (12, 0): "blackwell", (12, 1): "blackwell",
}  # fmt: skip
"""CUDA compute capabilities (``sm_XY``) and their generation, for ``custom:`` targets."""
_AMD_ARCHITECTURES: dict[str, Architecture] = {"gfx90a": "cdna2", "gfx942": "cdna3", "gfx950": "cdna4"}
_CUSTOM = re.compile(r"custom:(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>gib|gb|mib|mb):(?P<arch>sm_?\d+|gfx\w+)")
_UNITS = {"gib": 1 << 30, "gb": 10**9, "mib": 1 << 20, "mb": 10**6}


def custom_device(spec: str) -> DeviceProfile:
    """A GPU the catalog lacks, from ``custom:<memory>:<arch>`` (``custom:48GiB:sm_89``,
    ``custom:192GB:gfx942``): the memory as the driver would report it and the architecture, which
    sets the kernels, the context size and bf16/fp8 support."""
    match = _CUSTOM.fullmatch(spec.strip().lower())
    if match is None:
        raise ConfigError(
            f"a custom device is custom:<memory>:<arch>, e.g. custom:48GiB:sm_89 or custom:192GB:gfx942; got {spec!r}"
        )
    memory = int(float(match["amount"]) * _UNITS[match["unit"]])
    arch = match["arch"].replace("_", "")
    source = f"given ({spec.strip()})"
    if arch.startswith("gfx"):
        architecture = _AMD_ARCHITECTURES.get(arch)
        if architecture is None:
            raise ConfigError(f"unknown AMD architecture {arch}; choose one of: {', '.join(_AMD_ARCHITECTURES)}")
        profile = _amd(spec.strip(), f"custom {arch}", architecture, arch, 0, 0, source)
        return replace(profile, memory_bytes=memory, multiprocessors=None)
    digits = arch.removeprefix("sm")
    capability = (int(digits[:-1]), int(digits[-1]))
    nvidia = _NVIDIA_ARCHITECTURES.get(capability)
    if nvidia is None:
        known = ", ".join(f"sm_{major}{minor}" for major, minor in _NVIDIA_ARCHITECTURES)
        raise ConfigError(f"unknown CUDA architecture sm_{digits}; choose one of: {known}")
    profile = _nvidia(spec.strip(), f"custom sm_{digits}", "datacenter", nvidia, capability, 0, 0, source)
    return replace(profile, memory_bytes=memory, multiprocessors=None)


def get_device(name: str) -> DeviceProfile:
    """The profile called ``name`` (any case, spacing or alias; ``custom:<memory>:<arch>`` for a GPU
    the catalog lacks), or a ConfigError listing the choices."""
    if name.strip().lower().startswith("custom"):
        return custom_device(name)
    key = _LOOKUP.get(_fold(name))
    if key is not None:
        return DEVICES[key]
    close = dict.fromkeys(_LOOKUP[c] for c in difflib.get_close_matches(_fold(name), _LOOKUP, n=5, cutoff=0.5))
    hint = f"did you mean {' or '.join(map(repr, list(close)[:3]))}? " if close else ""
    raise ConfigError(
        f"unknown device {name!r}; {hint}`vramsim gpus` lists all {len(DEVICES)} targets "
        "(custom:<memory>:<arch> for another, e.g. custom:48GiB:sm_89)"
    )


_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|amd|instinct)\b")


def _model(reported: str) -> str:
    """The model part of a device name, folded: ``"NVIDIA GeForce RTX 3080 Ti"`` -> ``"rtx3080ti"``."""
    return _fold(_VENDOR_WORDS.sub(" ", reported.lower()))


def match_reported_name(reported: str, total_memory: int) -> DeviceProfile | None:
    """The profile of a GPU that ``torch.cuda`` calls ``reported`` with ``total_memory`` bytes.

    A name the catalog lists wins; several cards sharing it (RTX 3080 10/12 GB) are told apart
    by memory. Otherwise the longest catalog name the reported one starts with ("NVIDIA H100
    80GB HBM3 ..." variants), again closest in memory; ``None`` when nothing matches.
    """
    model = _model(reported)
    known = [(p, _model(r)) for p in DEVICES.values() for r in p.reported_names]
    exact = [p for p, m in known if m == model]
    if not exact:
        prefixes = [(len(m), p) for p, m in known if m and model.startswith(m)]
        longest = max((n for n, _ in prefixes), default=0)
        exact = [p for n, p in prefixes if n == longest]
    return min(exact, key=lambda p: abs((p.memory_bytes or 0) - total_memory), default=None)
