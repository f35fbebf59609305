"""Assumed overheads: the right figures per device, and the way they nest into the counters."""

from __future__ import annotations

import pytest

from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import (
    CUBLAS_WORKSPACE_BYTES_DEFAULT,
    CUBLAS_WORKSPACE_BYTES_SM90_PLUS,
    CUDA_CONTEXT_BYTES,
    CUDA_CONTEXT_BYTES_EAGER_LOADING,
    CUDA_KERNELS_LOADED_BYTES,
    HIPBLAS_WORKSPACE_BYTES_GFX94_95,
    HIPBLASLT_WORKSPACE_BYTES,
    NCCL_LL128_BUFFER_BYTES,
    NCCL_LL_BUFFER_BYTES,
    Overhead,
    cuda_context_bytes,
    overheads_for,
    totals,
)
from vramsim.estimators.devices import DEVICES, get_device

MiB = 1 << 20


def _by_counter(items: list[Overhead]) -> dict[str, int]:
    found: dict[str, int] = {}
    for item in items:
        found[item.counted_in] = found.get(item.counted_in, 0) + item.bytes
    return found


def test_source_figures_are_the_ones_in_pytorch_and_nccl() -> None:
    assert CUBLAS_WORKSPACE_BYTES_DEFAULT == 8_519_680
    assert 32 * MiB == CUBLAS_WORKSPACE_BYTES_SM90_PLUS
    assert 128 * MiB == HIPBLAS_WORKSPACE_BYTES_GFX94_95
    assert 76 * MiB == HIPBLASLT_WORKSPACE_BYTES
    assert NCCL_LL_BUFFER_BYTES == 512 * 1024
    assert NCCL_LL128_BUFFER_BYTES == 4_915_200


def test_cpu_pays_no_overhead() -> None:
    assert overheads_for(get_device("cpu"), world_size=8, training=True) == []


@pytest.mark.parametrize(
    ("name", "workspace"),
    [
        ("a100-80gb", 8_519_680),
        ("t4", 8_519_680),
        ("l4", 8_519_680),
        ("rtx-3080-ti", 8_519_680),
        ("rtx-6000-ada", 8_519_680),
        ("h100-sxm", 32 * MiB),
        ("h20", 32 * MiB),
        ("gh200", 32 * MiB),
        ("h200", 32 * MiB),
        ("b200", 32 * MiB),
        ("gb200", 32 * MiB),
        ("rtx-5090", 32 * MiB),
        ("rtx-5070", 32 * MiB),
    ],
)
def test_cublas_workspace_follows_compute_capability(name: str, workspace: int) -> None:
    device = get_device(name)
    found = overheads_for(device)
    assert _by_counter(found) == {"device": cuda_context_bytes(device, training=False), "allocated": workspace}
    assert all(item.source for item in found)


def test_context_is_the_bare_one_plus_the_kernels_a_step_loads() -> None:
    """Measured on an H200: 618.8 MiB bare, 694.8 MiB after a forward step, 766.8 MiB after a training step."""
    h200 = get_device("h200")
    assert CUDA_CONTEXT_BYTES["hopper"] == 648_871_936
    assert cuda_context_bytes(h200, training=False) == 728_563_712
    assert cuda_context_bytes(h200, training=True) == 804_061_184
    assert _by_counter(overheads_for(h200, training=True))["device"] == 804_061_184


def test_eager_module_loading_swaps_the_bare_context_and_nothing_else() -> None:
    """Eager loading changes the context only: the measured eager one, the same step kernels, the same workspaces."""
    v100 = get_device("v100-16gb")
    lazy = overheads_for(v100, training=True)
    eager = overheads_for(v100, training=True, module_loading="eager")
    assert CUDA_CONTEXT_BYTES_EAGER_LOADING["volta"] == 1343 * MiB
    assert cuda_context_bytes(v100, training=True, module_loading="eager") == 1343 * MiB + CUDA_KERNELS_LOADED_BYTES["training"]
    lazy_counts, eager_counts = _by_counter(lazy), _by_counter(eager)
    assert eager_counts["device"] - lazy_counts["device"] == (1343 - 300) * MiB
    assert {k: v for k, v in eager_counts.items() if k != "device"} == {k: v for k, v in lazy_counts.items() if k != "device"}


def test_eager_module_loading_on_ampere_is_the_published_rtx_3090_reading() -> None:
    """pytorch/pytorch#55277: 1687 MiB after a one-element tensor, torch 1.8.2+cu111 (eager) on an RTX 3090."""
    a100 = get_device("a100-80gb")
    eager = cuda_context_bytes(a100, training=False, module_loading="eager")
    assert eager == 1687 * MiB + CUDA_KERNELS_LOADED_BYTES["inference"]
    assert eager - cuda_context_bytes(a100, training=False) == (1687 - 400) * MiB


def test_eager_module_loading_on_turing_is_the_published_rtx_2080_ti_reading() -> None:
    """pytorch/pytorch#49877: 1035 MiB on nvidia-smi holding one 163,840,000 B tensor, torch 1.6.0+cu101 (eager) on an
    RTX 2080 Ti; the tensor's block is 79 of the allocator's 2 MiB steps."""
    t4 = get_device("t4")
    segment = -(-163_840_000 // (2 * MiB)) * 2 * MiB
    eager = cuda_context_bytes(t4, training=True, module_loading="eager")
    assert eager == 1035 * MiB - segment + CUDA_KERNELS_LOADED_BYTES["training"]
    assert eager - cuda_context_bytes(t4, training=True) == 1035 * MiB - segment - 300 * MiB


@pytest.mark.parametrize("name", ["h100", "rtx-4090", "mi300x"])
def test_eager_module_loading_is_refused_where_no_one_measured_it(name: str) -> None:
    with pytest.raises(ConfigError, match=r"eager module loading for architecture .* is what is missing|ROCm"):
        overheads_for(get_device(name), module_loading="eager")


def test_training_counts_a_workspace_for_autograds_thread() -> None:
    inference = totals(overheads_for(get_device("h100")))
    training = totals(overheads_for(get_device("h100"), training=True))
    assert training.allocated == 2 * inference.allocated == 64 * MiB


@pytest.mark.parametrize(
    ("name", "hipblas"),
    [("mi210", 32 * MiB), ("mi250x", 32 * MiB), ("mi300x", 128 * MiB), ("mi325x", 128 * MiB), ("mi355x", 128 * MiB)],
)
def test_instinct_gpus_have_hip_context_and_both_blas_workspaces(name: str, hipblas: int) -> None:
    """hipBLAS: 128 MiB on gfx94x/gfx95x, 32 MiB on gfx90a; hipBLASLt's 76 MiB everywhere."""
    found = overheads_for(get_device(name))
    assert [item.name for item in found] == ["HIP context", "hipBLAS workspace x1", "hipBLASLt workspace x1"]
    assert _by_counter(found)["allocated"] == hipblas + 76 * MiB


def test_world_size_adds_nccl_buffers_outside_the_allocator() -> None:
    alone = overheads_for(get_device("h100"))
    ranked = overheads_for(get_device("h100"), world_size=8)
    assert len(ranked) == len(alone) + 1
    nccl = ranked[-1]
    assert nccl.counted_in == "device"
    assert nccl.bytes == 16 * 2 * (4 * MiB + 512 * 1024 + 4_915_200)
    assert nccl.name.startswith("NCCL")
    assert overheads_for(get_device("mi300x"), world_size=2)[-1].name.startswith("RCCL")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_world_size_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ConfigError, match="world_size"):
        overheads_for(get_device("h100"), world_size=bad)  # type: ignore[arg-type]


def test_totals_nest_allocated_inside_reserved_inside_device() -> None:
    items = [
        Overhead(name="a", bytes=1, source="s", counted_in="allocated"),
        Overhead(name="r", bytes=10, source="s", counted_in="reserved"),
        Overhead(name="d", bytes=100, source="s", counted_in="device"),
    ]
    found = totals(items)
    assert (found.allocated, found.reserved, found.device) == (1, 11, 111)


def test_every_gpu_has_a_context_entry() -> None:
    for device in DEVICES.values():
        if device.vendor != "cpu":
            assert totals(overheads_for(device)).device > totals(overheads_for(device)).allocated > 0
