"""The device catalog: lookup, aliases, the error for unknown names, per-architecture flags,
well-formed entries and the mapping from ``torch.cuda``'s device names to entries."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.devices import ALIASES, DEVICES, device_names, get_device, match_reported_name
from vramsim.validation.validate import cuda_target_name

REQUESTED = [
    "cpu", "v100-16gb", "v100-32gb", "t4", "a10", "a10g", "a30", "a40", "a100-40gb", "a100-40gb-pcie", "a100-80gb",
    "a100-80gb-pcie", "l4", "l40", "l40s", "h20", "h100-pcie", "h100-sxm", "h100-nvl", "gh200", "h200", "h200-nvl",
    "b200", "gb200", "rtx-a6000", "rtx-6000-ada", "rtx-3060", "rtx-3060-ti", "rtx-3070", "rtx-3070-ti", "rtx-3080",
    "rtx-3080-12gb", "rtx-3080-ti", "rtx-3090", "rtx-3090-ti", "rtx-4060-ti", "rtx-4060-ti-16gb", "rtx-4070",
    "rtx-4070-ti", "rtx-4070-ti-super", "rtx-4080", "rtx-4080-super", "rtx-4090", "rtx-5070", "rtx-5070-ti",
    "rtx-5080", "rtx-5090", "mi210", "mi250x", "mi300x", "mi325x", "mi355x",
]  # fmt: skip

_GIB = 1 << 30
_ARCH_OF_CAPABILITY = {
    (7, 0): "volta",
    (7, 5): "turing",
    (8, 0): "ampere",
    (8, 6): "ampere",
    (8, 9): "ada",
    (9, 0): "hopper",
    (10, 0): "blackwell",
    (12, 0): "blackwell",
}
_ARCH_OF_GFX = {"gfx90a": "cdna2", "gfx942": "cdna3", "gfx950": "cdna4"}


def test_catalog_holds_every_requested_target_in_order() -> None:
    assert device_names() == REQUESTED
    assert all(DEVICES[name].name == name for name in REQUESTED)


@pytest.mark.parametrize("profile", [p for p in DEVICES.values() if p.vendor != "cpu"], ids=lambda p: p.name)
def test_every_gpu_entry_is_well_formed(profile: Any) -> None:
    """Key spelling, a plausible memory with a source, architecture consistent with the ISA, a multiprocessor count."""
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", profile.name)
    assert profile.memory_bytes is not None and profile.memory_bytes % (1 << 20) == 0
    assert 7 * _GIB < profile.memory_bytes < 300 * _GIB
    assert profile.memory_source and profile.multiprocessors and profile.multiprocessors > 0
    assert profile.reported_names[0] == profile.label
    if profile.vendor == "nvidia":
        assert profile.gfx_arch is None and profile.compute_capability is not None
        assert _ARCH_OF_CAPABILITY[profile.compute_capability] == profile.architecture
        assert profile.supports_bf16 == (profile.compute_capability >= (8, 0))
        assert profile.supports_fp8 == (profile.compute_capability >= (8, 9))
    else:
        assert profile.compute_capability is None and profile.gfx_arch is not None
        assert _ARCH_OF_GFX[profile.gfx_arch] == profile.architecture
        assert profile.supports_bf16 and profile.supports_fp8 == (profile.architecture != "cdna2")


def test_estimates_say_so_and_measured_figures_name_where() -> None:
    seen = ("#", "_CudaDeviceProperties", "measured", "OOM message")
    for profile in DEVICES.values():
        source = profile.memory_source
        assert profile.vendor == "cpu" or source.startswith("estimate") or any(word in source for word in seen)


@pytest.mark.parametrize("spelling", ["h100-sxm", "H100-SXM", "h100_sxm", "H100 SXM", " h100sxm "])
def test_lookup_ignores_case_spaces_and_separators(spelling: str) -> None:
    assert get_device(spelling).name == "h100-sxm"


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("h100", "h100-sxm"),
        ("H100-80GB", "h100-sxm"),
        ("a100", "a100-80gb"),
        ("v100", "v100-32gb"),
        ("4090", "rtx-4090"),
        ("rtx4090", "rtx-4090"),
        ("H200-141GB", "h200"),
        ("3080ti", "rtx-3080-ti"),
        ("rtx-3080-ti", "rtx-3080-ti"),
        ("RTX 3080 Ti", "rtx-3080-ti"),
        ("3080", "rtx-3080"),
        ("a6000", "rtx-a6000"),
        ("h100-nvl", "h100-nvl"),
        ("mi250x", "mi250x"),
        ("4070 ti super", "rtx-4070-ti-super"),
        ("6000 ada", "rtx-6000-ada"),
        ("4060ti-16gb", "rtx-4060-ti-16gb"),
    ],
)
def test_names_people_type_resolve(alias: str, name: str) -> None:
    assert get_device(alias).name == name


def test_every_alias_points_into_the_catalog() -> None:
    assert set(ALIASES.values()) <= set(DEVICES)


def test_unknown_name_is_one_line_with_the_closest_names() -> None:
    with pytest.raises(ConfigError) as caught:
        get_device("h1000")
    message = str(caught.value)
    assert message.startswith("unknown device 'h1000'; did you mean 'h100-sxm'")
    assert "vramsim gpus" in message and "\n" not in message
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ConfigError, match=r"did you mean 'rtx-3080-ti'"):
        get_device("rtx3080tii")
    with pytest.raises(ConfigError, match=r"^unknown device 'zzzz'; `vramsim gpus` lists all 52 targets \(custom:<memory>:"):
        get_device("zzzz")


@pytest.mark.parametrize(
    ("name", "bf16", "fp8"),
    [
        ("v100-16gb", False, False),
        ("t4", False, False),
        ("a100-80gb", True, False),
        ("a10g", True, False),
        ("l4", True, True),
        ("h100-sxm", True, True),
        ("b200", True, True),
        ("rtx-5090", True, True),
        ("mi250x", True, False),
        ("mi300x", True, True),
        ("mi355x", True, True),
    ],
)
def test_precision_flags_follow_the_architecture(name: str, bf16: bool, fp8: bool) -> None:
    device = get_device(name)
    assert (device.supports_bf16, device.supports_fp8) == (bf16, fp8)


def test_memory_is_the_driver_figure_below_the_marketing_size() -> None:
    marketed = [
        ("a100-40gb", 40),
        ("a100-80gb", 80),
        ("h100-sxm", 80),
        ("h200", 141),
        ("t4", 16),
        ("a10", 24),
        ("rtx-3080", 10),
        ("rtx-3080-ti", 12),
        ("h100-nvl", 94),
        ("mi250x", 64),
        ("mi355x", 288),
    ]
    for name, gigabytes in marketed:
        memory = get_device(name).memory_bytes
        assert memory is not None
        assert gigabytes * 10**9 * 0.9 < memory < gigabytes * _GIB
    assert get_device("h100-sxm").memory_bytes == 81_090 * 2**20
    h200 = get_device("h200").memory_bytes or 0
    assert abs(h200 - 150_109_880_320) < 2**20  # measured on an H200, driver 580.159.04; the catalog keeps whole MiB


REPORTED = [
    ("NVIDIA GeForce RTX 3080 Ti", 12, "rtx-3080-ti"),
    ("NVIDIA GeForce RTX 3080", 10, "rtx-3080"),
    ("NVIDIA GeForce RTX 3080", 12, "rtx-3080-12gb"),
    ("NVIDIA GeForce RTX 4060 Ti", 16, "rtx-4060-ti-16gb"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", 16, "rtx-4070-ti-super"),
    ("NVIDIA GeForce RTX 4070 Ti", 12, "rtx-4070-ti"),
    ("NVIDIA RTX A6000", 48, "rtx-a6000"),
    ("NVIDIA RTX 6000 Ada Generation", 48, "rtx-6000-ada"),
    ("NVIDIA H100 NVL", 94, "h100-nvl"),
    ("NVIDIA H100 80GB HBM3", 80, "h100-sxm"),
    ("NVIDIA H100 PCIe", 80, "h100-pcie"),
    ("NVIDIA H200 NVL", 141, "h200-nvl"),
    ("NVIDIA H200", 141, "h200"),
    ("NVIDIA A100-SXM4-80GB", 80, "a100-80gb"),
    ("NVIDIA A100 80GB PCIe", 80, "a100-80gb-pcie"),
    ("NVIDIA A100-PCIE-40GB", 40, "a100-40gb-pcie"),
    ("NVIDIA A10", 24, "a10"),
    ("NVIDIA A10G", 24, "a10g"),
    ("NVIDIA L40", 48, "l40"),
    ("NVIDIA L40S", 48, "l40s"),
    ("Tesla V100-PCIE-16GB", 16, "v100-16gb"),
    ("Tesla T4", 16, "t4"),
    ("NVIDIA GH200 480GB", 96, "gh200"),
    ("AMD Instinct MI250X/MI250", 64, "mi250x"),
    ("AMD Instinct MI300X", 192, "mi300x"),
    ("AMD Instinct MI300X VF", 192, "mi300x"),  # a virtual function: longest listed prefix
]


@pytest.mark.parametrize(("reported", "gigabytes", "name"), REPORTED)
def test_cuda_target_name_maps_torch_device_names(
    reported: str, gigabytes: int, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``validate --device cuda`` names the catalog entry of what ``torch.cuda`` reports."""
    props = type("Props", (), {"total_memory": int(gigabytes * _GIB * 0.98)})()
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: reported)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    assert cuda_target_name() == name


def test_a_gpu_outside_the_catalog_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    props = type("Props", (), {"total_memory": 8 * _GIB})()
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA GeForce GTX 1080")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    with pytest.raises(UnsupportedError, match="GTX 1080 is not in the catalog"):
        cuda_target_name()
    assert match_reported_name("NVIDIA GeForce RTX 30", 8 * _GIB) is None


def test_the_measured_h200_record_maps_to_its_catalog_entry() -> None:
    """benchmarks/measured/h200.json: torch's own name and total_memory pick ``h200``, within a MiB."""
    machine = json.loads((Path(__file__).parents[2] / "benchmarks" / "measured" / "h200.json").read_text())["machine"]
    profile = match_reported_name(machine["device_name"], machine["total_memory"])
    assert profile is not None and profile.name == "h200"
    assert abs((profile.memory_bytes or 0) - machine["total_memory"]) < 2**20


@pytest.mark.parametrize(
    ("spec", "memory", "architecture", "bf16", "fp8"),
    [
        ("custom:48GiB:sm_89", 48 << 30, "ada", True, True),
        ("custom:24GB:sm_75", 24 * 10**9, "turing", False, False),
        ("Custom:192gb:gfx942", 192 * 10**9, "cdna3", True, True),
    ],
)
def test_a_custom_gpu_is_its_memory_and_architecture(spec: str, memory: int, architecture: str, bf16: bool, fp8: bool) -> None:
    profile = get_device(spec)
    assert (profile.memory_bytes, profile.architecture, profile.supports_bf16, profile.supports_fp8) == (
        memory,
        architecture,
        bf16,
        fp8,
    )
    assert profile.name == spec


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("custom", "custom:<memory>:<arch>"),
        ("custom:48:sm_89", "custom:<memory>:<arch>"),
        ("custom:48GiB:sm_99", "unknown CUDA architecture sm_99"),
        ("custom:8GB:gfx1100", "unknown AMD architecture gfx1100"),
    ],
)
def test_a_bad_custom_gpu_is_one_clear_line(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_device(spec)
