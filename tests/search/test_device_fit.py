"""Which GPU do I need: ``vramsim fit`` without ``--device`` judges every catalog GPU on one trace."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers
from cli_runs import run, saved_config

import vramsim
from vramsim.search import devices
from vramsim.search.devices import device_fit


def test_every_gpu_is_judged_on_one_trace(tiny_gpt2: transformers.GPT2Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """One trace (for h100-sxm); each GPU's figure is that graph replayed with its own overheads, the same figure a
    trace for it gives where its kernels are the traced ones; smallest first, the smallest that fit listed."""
    traces: list[str] = []
    real = devices.trace_workload
    monkeypatch.setattr(devices, "trace_workload", lambda m, c, t, **k: traces.append(t.name) or real(m, c, t, **k))
    found = device_fit(tiny_gpt2, seq_len=64, batch_size=2)
    assert traces == ["h100-sxm"] and found.traced_on == "h100-sxm"
    usable = [v.usable_bytes for v in found.devices]
    assert usable == sorted(usable) and len(found.devices) + len(found.refused) == 51  # the catalog's GPUs
    assert all(v.fits == (v.device_bytes <= v.usable_bytes) for v in found.devices)
    by_name = {v.device: v for v in found.devices}
    for name in ("h100-sxm", "h100-pcie", "h200"):  # sm 9.0: the traced kernels
        report = vramsim.simulate(tiny_gpt2, seq_len=64, batch_size=2, device=name)
        assert by_name[name].kernels_traced and by_name[name].device_bytes == report.device_bytes
    assert not by_name["rtx-4090"].kernels_traced and not by_name["mi300x"].kernels_traced
    smallest = found.smallest
    assert smallest and smallest[0] == next(v for v in found.devices if v.fits) and found.advice == []
    assert {v.usable_bytes for v in smallest} == set(sorted({v.usable_bytes for v in found.devices if v.fits})[:3])


def test_when_no_gpu_holds_it_more_gpus_and_offload_are_measured(tiny_llama: transformers.LlamaConfig) -> None:
    """With 99.9% headroom no GPU holds the step: the advice is FSDP2 full over more GPUs and ZeRO-3 with the model
    states offloaded, each the figure ``simulate`` gives for it on the traced device."""
    asked = {"seq_len": 64, "headroom": 0.999}
    found = device_fit(tiny_llama, **asked)
    assert found.devices and not any(v.fits for v in found.devices) and found.smallest == []
    more, offload = found.advice
    assert more.changes == {"gpus": 1024, "fsdp": "full"} and not more.fits  # overheads alone pass 0.1% of any GPU
    assert offload.changes == {"offload_states": "params", "zero": 3}
    for advice in (more, offload):
        assert advice.device_bytes == vramsim.simulate(tiny_llama, device="h100", **asked, **advice.changes).device_bytes


def test_fit_without_device_at_80_columns(
    tmp_path: Path, tiny_gpt2: transformers.GPT2Config, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vramsim fit MODEL`` (no --device) lists the smallest GPUs that hold it, within 80 columns; --device any with
    --strategies is one line of error (the strategy search weighs one device)."""
    monkeypatch.setenv("COLUMNS", "80")
    model = saved_config(tmp_path, tiny_gpt2)
    code, out, _ = run(capsys, "fit", model, "--seq-len", "64")
    lines = out.splitlines()
    listed = lines.index("  the smallest GPUs that hold it:")  # after the model's path, wrapped
    assert code == 0 and lines[listed + 1].startswith("    ") and ": " in lines[listed + 1]
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines)
    assert lines[-1].startswith("51 GPUs judged on one trace in ")
    code, _, err = run(capsys, "fit", model, "--strategies", "--device", "any")
    assert code == 2 and "--strategies weighs one device's memory: name it with --device" in err


def test_a_gpu_that_holds_it_by_emptying_the_cache_fits(tiny_llama: transformers.LlamaConfig) -> None:
    """h200 replays as h100-pcie does (the same overheads and allocator), but what runs within the usable memory
    depends on the size. Regression: with ~1 GB usable on h200, batch 86 reserves 1,001,193,472 B there without a
    limit, yet runs within it (trace: FITS); the search reused h100-pcie's replay, out of memory on that smaller
    card, and called h200 a misfit at the unlimited figure. Each GPU's verdict is now trace's on it."""
    asked = {"seq_len": 64, "batch_size": 86, "headroom": 1 - 1_000_000_000 / 150_109_945_856}
    traced = vramsim.simulate(tiny_llama, device="h200", **asked)
    assert traced.fits and traced.allocator_pressure is not None
    assert traced.allocator_pressure.unlimited_device_bytes == 1_001_193_472
    by_name = {v.device: v for v in device_fit(tiny_llama, **asked).devices}
    assert (by_name["h200"].fits, by_name["h200"].device_bytes) == (True, traced.device_bytes)
    assert not by_name["h100-pcie"].fits
