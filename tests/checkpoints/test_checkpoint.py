"""``vramsim checkpoint`` against a real checkpoint of the same tiny run, saved and restored on the CPU."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import peft
import pytest
import torch
import transformers
from torch.profiler import ProfilerActivity, profile
from transformers import get_scheduler
from transformers.trainer_callback import TrainerState

import vramsim
from tests.cli_runs import run, saved_config
from tests.profiled import allocation_trace
from vramsim.checkpoints.checkpoint import checkpoint
from vramsim.checkpoints.files import safetensors_header
from vramsim.config import SimulationConfig
from vramsim.validation.measure import RealRun
from vramsim.workload.build import build_program
from vramsim.workload.program import Program, run_program
from vramsim.workload.quiet import quiet_profiler

_OPTIONS: dict[str, Any] = {"seq_len": 16, "device": "cpu"}
_PICKLE_MEMO_BYTES = 16
"""Per tensor, the most a torch.save file is predicted over on the cpu: torch.save pickles a cpu storage's location
as one memoised "cpu" string (a 2-byte memo reference), a FakeTensor's as a new string each time (``X``, length,
"cpu", a memo put: up to 13 bytes), and the added memo entries can lengthen later references by 3 bytes."""
_ZIP_ALIGNMENT = 64
"""torch.save aligns each record's data to 64 bytes: a longer pickle can move the records after it by up to that."""


class _Steps(RealRun):
    def begin_step(self, step: int) -> None:
        pass

    def end_step(self) -> None:
        pass


def _trained(model: Any, **options: Any) -> Program:
    """The program ``checkpoint`` traces, built and run for real on the CPU."""
    torch.manual_seed(0)
    program = build_program(model, SimulationConfig.from_options(**_OPTIONS, **options), device="cpu")
    run_program(program, _Steps())
    return program


def _trainer_save(program: Program, folder: Path) -> None:
    """The calls ``Trainer._save_checkpoint`` makes on one CPU process (training_args.bin aside)."""
    assert program.optimizer is not None
    program.model.save_pretrained(folder)
    torch.save(program.optimizer.state_dict(), folder / "optimizer.pt")
    scheduler = get_scheduler("linear", program.optimizer, num_warmup_steps=0, num_training_steps=1)
    torch.save(scheduler.state_dict(), folder / "scheduler.pt")
    torch.save(
        {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}, folder / "rng_state.pth"
    )
    TrainerState(global_step=1, max_steps=1).save_to_json(str(folder / "trainer_state.json"))


def test_safetensors_header_is_the_writer_s(tmp_path: Path) -> None:
    """The header bytes equal safetensors' own across dtypes (the writer orders by dtype, then by name)."""
    from safetensors.torch import save_file

    tensors = {
        "b": torch.ones(3, dtype=torch.bfloat16),
        "a": torch.ones(2, 5),
        "c": torch.ones(7, dtype=torch.int64),
        "d": torch.ones((), dtype=torch.float16),
    }
    save_file(tensors, tmp_path / "x.safetensors", metadata={"format": "pt"})
    header = safetensors_header(tensors, {"format": "pt"})
    assert (tmp_path / "x.safetensors").read_bytes()[: len(header)] == header


def _trainer_restore(program: Program, folder: Path) -> None:
    """``Trainer._load_from_checkpoint`` then ``_load_optimizer_and_scheduler`` on one CPU process."""
    from safetensors.torch import load_file

    assert program.optimizer is not None
    if isinstance(program.model, peft.PeftModel):  # its adapter files, on the device
        program.model.load_adapter(str(folder), "default", is_trainable=True)
    else:
        state = load_file(folder / "model.safetensors", device="cpu")
        program.model.load_state_dict(state, strict=False)
        del state
    program.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location="cpu", weights_only=True))


def _torch_save(program: Program, folder: Path) -> None:
    assert program.optimizer is not None
    torch.save({"model": program.model.state_dict(), "optimizer": program.optimizer.state_dict()}, folder / "checkpoint.pt")


def _torch_restore(program: Program, folder: Path) -> None:
    assert program.optimizer is not None
    loaded = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=True)
    program.model.load_state_dict(loaded["model"])
    program.optimizer.load_state_dict(loaded["optimizer"])
    del loaded


_FORMATS = {"trainer": (_trainer_save, _trainer_restore), "torch": (_torch_save, _torch_restore)}


def _restore_peak(program: Program, folder: Path, save_format: str) -> int:
    """Allocated bytes at the top of a real restore into a fresh model and optimizer: the parameters and
    buffers held before it, plus the profiler's peak inside it."""
    model = program.model
    held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in [*model.parameters(), *model.buffers()]}
    with quiet_profiler(profile(activities=[ProfilerActivity.CPU], profile_memory=True)) as prof:
        _FORMATS[save_format][1](program, folder)
    peak, _ = allocation_trace(prof)
    return sum(held.values()) + peak


_LORA = {"r": 4, "target_modules": "all-linear"}


@pytest.mark.parametrize(
    ("save_format", "options"),
    [("trainer", {}), ("trainer", {"dtype": "bf16"}), ("trainer", {"lora": _LORA}), ("torch", {})],
    ids=["fp32", "bf16", "lora", "torch"],
)
def test_checkpoint_is_a_real_one_s(
    tiny_llama: transformers.LlamaConfig, tmp_path: Path, save_format: str, options: dict[str, Any]
) -> None:
    """Against a real checkpoint of the same run, saved and then restored into a fresh model and optimizer:
    every file has the predicted size, to the byte for the safetensors weights (tied ones once), the JSON files
    and the small torch.save files, the optimizer's torch.save files within the pickle memo of their location
    tags; the restore's peak equals the profiler's within 0.5%."""
    tiny_llama.tie_word_embeddings = True
    report = checkpoint(tiny_llama, **_OPTIONS, save_format=save_format, **options)
    real = _trained(tiny_llama, **options)
    _FORMATS[save_format][0](real, tmp_path)
    predicted = {f.name: f.bytes for f in report.files}
    on_disk = {name: os.path.getsize(tmp_path / name) for name in os.listdir(tmp_path)}
    assert set(on_disk) == set(predicted) - {"training_args.bin"}
    big = "optimizer.pt" if save_format == "trainer" else "checkpoint.pt"
    held = real.optimizer.state_dict()["state"].values()  # type: ignore[union-attr]
    tensors = sum(map(len, held)) + (len(real.model.state_dict()) if save_format == "torch" else 0)
    assert 0 <= predicted.pop(big) - on_disk.pop(big) <= _PICKLE_MEMO_BYTES * tensors + _ZIP_ALIGNMENT
    assert {name: predicted[name] for name in on_disk} == on_disk
    fresh = build_program(tiny_llama, SimulationConfig.from_options(**_OPTIONS, **options), device="cpu")
    assert report.restore_peak_bytes / _restore_peak(fresh, tmp_path, save_format) == pytest.approx(1.0, abs=0.005)


def test_gpu_restore_holds_states_on_the_device_and_the_file_on_the_host(tiny_llama: transformers.LlamaConfig) -> None:
    """On a GPU with the Trainer's map_location=cpu the loaded optimizer state sits on the host (the weights file
    always does); mapped to the device it is made there and kept as loaded (no second copy); the plain loop's
    one file, loaded onto the device, also holds the weights there beside the parameters until it is dropped."""
    on_host = checkpoint(tiny_llama, seq_len=16, device="h100")
    on_device = checkpoint(tiny_llama, seq_len=16, device="h100", map_location="device")
    plain = checkpoint(tiny_llama, seq_len=16, device="h100", save_format="torch")
    optimizer = next(f for f in on_host.files if f.name == "optimizer.pt").tensor_bytes
    weights = next(f for f in on_host.files if f.name == "model.safetensors").tensor_bytes
    assert on_host.map_location == "cpu" and on_host.restore_host_bytes == optimizer
    assert on_device.restore_host_bytes == weights and on_device.restore_peak_bytes == on_host.restore_peak_bytes
    assert plain.map_location == "device" and plain.restore_breakdown["checkpoint_loaded"] >= weights
    assert plain.restore_peak_bytes - on_host.restore_peak_bytes == plain.restore_breakdown["checkpoint_loaded"]


def test_api_is_exported_and_json_is_the_report(
    tiny_gpt2: transformers.GPT2Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vramsim.checkpoint`` is the CLI's ``checkpoint --json``."""
    path = saved_config(tmp_path, tiny_gpt2)
    code, out, _ = run(capsys, "checkpoint", path, "--seq-len", "16", "--device", "cpu", "--json")
    assert code == 0
    printed = json.loads(out)
    report = vramsim.checkpoint(path, seq_len=16, device="cpu")
    assert printed["disk_bytes"] == report.disk_bytes and printed["restore_peak_bytes"] == report.restore_peak_bytes


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["--task", "forward"], "holds optimizer state", 2),
        (["--optimizer", "none"], "no optimizer state", 2),
        (["--map-location", "gpu"], "unknown map location 'gpu'", 2),
        (["--save-format", "zip"], "unknown save format 'zip'", 2),
        (["--gpus", "2", "--pp", "2"], "pipeline", 1),  # not modelled: no bad value
    ],
)
def test_bad_input_is_one_line(
    tiny_gpt2: transformers.GPT2Config,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
    status: int,
) -> None:
    code, _, err = run(capsys, "checkpoint", saved_config(tmp_path, tiny_gpt2), "--seq-len", "16", *argv)
    assert code == status and message in err and len(err.strip().splitlines()) == 1
