"""The device catalog: lookup, aliases, the error for unknown names, per-architecture flags."""

from __future__ import annotations

import pytest

from vramsim.errors import ConfigError
from vramsim.estimators.devices import ALIASES, DEVICES, device_names, get_device

EXPECTED = [
    "cpu", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "l4", "l40s",
    "a10g", "t4", "v100-16gb", "v100-32gb", "rtx-3090", "rtx-4090", "rtx-5090", "mi300x",
]  # fmt: skip


def test_catalog_holds_every_requested_target_in_order() -> None:
    assert device_names() == EXPECTED
    assert all(DEVICES[name].name == name for name in EXPECTED)


@pytest.mark.parametrize("spelling", ["h100-sxm", "H100-SXM", "h100_sxm", "H100 SXM", " h100sxm "])
def test_lookup_ignores_case_spaces_and_separators(spelling: str) -> None:
    assert get_device(spelling).name == "h100-sxm"


@pytest.mark.parametrize(
    ("alias", "name"),
    [("h100", "h100-sxm"), ("a100", "a100-80gb"), ("v100", "v100-32gb"), ("4090", "rtx-4090"), ("H200-141GB", "h200")],
)
def test_aliases_resolve_to_their_documented_target(alias: str, name: str) -> None:
    assert get_device(alias).name == name


def test_every_alias_points_into_the_catalog() -> None:
    assert set(ALIASES.values()) <= set(DEVICES)


def test_unknown_name_lists_the_choices_and_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        get_device("h1000")
    message = str(caught.value)
    assert "'h1000'" in message
    assert "did you mean 'h100-sxm'?" in message
    assert all(name in message for name in EXPECTED)
    assert "\n" not in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["v100-16gb", "v100-32gb", "t4"])
def test_volta_and_turing_have_no_bf16_or_fp8(name: str) -> None:
    device = get_device(name)
    assert not device.supports_bf16
    assert not device.supports_fp8


@pytest.mark.parametrize(
    ("name", "bf16", "fp8"),
    [("a100-80gb", True, False), ("a10g", True, False), ("l4", True, True), ("h100-sxm", True, True),
     ("b200", True, True), ("rtx-5090", True, True), ("mi300x", True, True)],
)  # fmt: skip
def test_precision_flags_follow_the_architecture(name: str, bf16: bool, fp8: bool) -> None:
    device = get_device(name)
    assert (device.supports_bf16, device.supports_fp8) == (bf16, fp8)


def test_vendor_specific_fields() -> None:
    h100, mi300x, cpu = get_device("h100"), get_device("mi300x"), get_device("cpu")
    assert (h100.vendor, h100.architecture, h100.compute_capability, h100.gfx_arch) == (
        "nvidia", "hopper", (9, 0), None,
    )  # fmt: skip
    assert (mi300x.vendor, mi300x.architecture, mi300x.compute_capability, mi300x.gfx_arch) == (
        "amd", "cdna3", None, "gfx942",
    )  # fmt: skip
    assert (cpu.vendor, cpu.memory_bytes, cpu.compute_capability) == ("cpu", None, None)


def test_memory_is_the_driver_figure_below_the_marketing_size() -> None:
    gib = 1 << 30
    for name, marketed in [("a100-40gb", 40), ("a100-80gb", 80), ("h100-sxm", 80), ("h200", 141), ("t4", 16)]:
        memory = get_device(name).memory_bytes
        assert memory is not None
        assert marketed * 10**9 * 0.9 < memory < marketed * gib
    assert get_device("h100-sxm").memory_bytes == 81_090 * 2**20
    assert all(profile.memory_source for profile in DEVICES.values())
