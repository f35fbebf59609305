"""Sharded checkpoints: DCP's per-rank files against real ``dcp.save`` runs, DeepSpeed's against its layout."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from math import ceil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
import torch.distributed as dist
import transformers

from tests.cli_runs import run, saved_config
from tests.profiled import allocation_trace, memory_profile
from vramsim.checkpoints import dcp as dcp_files
from vramsim.checkpoints.checkpoint import checkpoint

_SEQ = 8


def _config() -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=101,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )


def _sharded(mesh: Any) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A fresh FSDP2 model (each decoder layer, then the root) and its optimizer, as the cpu target runs it."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(_config())
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    model.model.rotary_emb.__init__(model.config)  # its inv_freq buffer, which to_empty left unset
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)  # vramsim's default, fused AdamW


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    ids = torch.randint(0, 101, (1, _SEQ))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@pytest.fixture
def one_rank() -> Iterator[object]:
    """A real gloo process group of one rank, in this process: DCP runs end to end."""
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def _on_disk(folder: Path) -> dict[str, int]:
    return {name: os.path.getsize(folder / name) for name in os.listdir(folder)}


def test_dcp_save_and_restore_are_real_ones_on_one_rank(one_rank: object, tmp_path: Path) -> None:
    """FSDP2 on one rank: every file equals a real ``dcp.save`` to the byte, and the restore's peak (a fresh model
    and optimizer: get_state_dict, dcp.load, set_state_dict) equals the profiler's within 0.5%."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    folder = tmp_path / "ckpt"
    model, optimizer = _sharded(one_rank)
    _step(model, optimizer)
    dcp.save(dict(zip(("model", "optim"), get_state_dict(model, optimizer), strict=True)), checkpoint_id=folder)
    with mock.patch.object(dcp_files, "DCP_CHECKPOINT_PATH", str(folder)):
        report = checkpoint(_config(), seq_len=_SEQ, device="cpu", gpus=1, fsdp="full")
    assert report.save_format == "dcp" and report.optimizer.startswith("torch.optim.AdamW")
    assert {f.name: f.bytes for f in report.files} == _on_disk(folder)

    fresh, fresh_optimizer = _sharded(one_rank)
    held = sum(t.untyped_storage().nbytes() for t in [*fresh.parameters(), *fresh.buffers()])
    with memory_profile() as prof:
        model_state, optim_state = get_state_dict(fresh, fresh_optimizer)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=folder)
        set_state_dict(fresh, fresh_optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    peak, _ = allocation_trace(prof)
    assert report.restore_peak_bytes / (held + peak) == pytest.approx(1.0, abs=0.005)


def _llama(vocab: int) -> transformers.LlamaConfig:
    config = _config()
    config.vocab_size = vocab
    return config


def test_zero_files_follow_deepspeed_s_layout() -> None:
    """ZeRO-2, bf16: rank 0's bf16 module file, and per rank the fp32 master partition and AdamW's two states over the
    group padded to a multiple of 2 x ranks (the last rank's master saved without its padding); ZeRO-3: a module
    file per rank, weights over the persistence threshold as 0-element placeholders."""
    n = 3
    zero2 = checkpoint(_llama(101), seq_len=_SEQ, device="h100", gpus=n, zero=2, mixed_precision="bf16")
    params = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(_llama(101)).parameters())
    aligned = ceil(params / (2 * n)) * 2 * n
    files = {f.name: f for f in zero2.files}
    assert files["mp_rank_00_model_states.pt"].tensor_bytes == params * 2  # bf16 weights, the tied ones once
    for rank in range(n):
        lean = aligned // n - (aligned - params if rank == n - 1 else 0)
        step = 4  # fused AdamW's float32 step counter on the device
        assert files[f"bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"].tensor_bytes == 4 * (lean + 2 * aligned // n) + step
    zero3 = checkpoint(_llama(2000), seq_len=_SEQ, device="h100", gpus=n, zero=3)
    module = next(f for f in zero3.files if f.name == "zero_pp_rank_1_mp_rank_00_model_states.pt")
    embedding = 2000 * 64 * 4
    full = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(_llama(2000)).parameters()) * 4
    assert module.tensor_bytes == full - embedding  # the tied embedding (128,000 elements > 1e5) is a placeholder
    assert zero3.restore_peak_bytes == zero3.save_peak_bytes  # no optimizer states until loaded, then the held ones


def test_cli_reports_each_rank_and_refuses_what_is_not_modelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` lists each rank's file; other shardings and mismatched formats are one line each."""
    path = saved_config(tmp_path, _config())
    code, out, _ = run(
        capsys,
        "checkpoint",
        path,
        "--seq-len",
        str(_SEQ),
        "--device",
        "h100",
        "--gpus",
        "2",
        "--fsdp",
        "full",
        "--async-save",
        "--json",
    )
    printed = json.loads(out)
    assert code == 0 and printed["save_format"] == "dcp"
    assert printed["save_host_bytes"] == max(f["tensor_bytes"] for f in printed["files"])  # async: the rank's state
    for argv, message, status in [  # 1: not modelled; 2: a bad argument
        (["--gpus", "2", "--zero", "2", "--save-format", "trainer"], "modelled is save_format='deepspeed'", 1),
        (["--gpus", "2", "--tp", "2"], "tensor, pipeline, context or expert parallel", 1),
        (["--save-format", "deepspeed"], "set zero", 2),
        (["--async-save"], "use save_format='dcp'", 2),
    ]:
        code, _, err = run(capsys, "checkpoint", path, "--seq-len", str(_SEQ), *argv)
        assert code == status and message in err and len(err.strip().splitlines()) == 1
