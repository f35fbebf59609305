"""DCP's per-rank files of a real N-rank save against ``vramsim checkpoint --save-format dcp``, FSDP2 and DDP.

``tests/test_sharded_checkpoint.py`` checks one rank in its own process; more ranks need more processes (gloo,
``torch.multiprocessing.spawn``), which take tens of seconds on two cores, so this check runs here, by hand:
``python benchmarks/dcp_ranks.py [RANKS]`` (default 2). It prints each file's real and predicted bytes and
exits 1 on any difference.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_sharded_checkpoint import _SEQ, _config, _sharded, _step

from vramsim.checkpoints import dcp as dcp_files
from vramsim.checkpoints.checkpoint import checkpoint


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _save_on_rank(rank: int, world: int, port: int, folder: str) -> None:
    """One of ``world`` gloo processes: a DCP save of an FSDP2 run, then of a replicated (DDP's) one."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model, optimizer = _sharded(init_device_mesh("cpu", (world,)))
    _step(model, optimizer)
    dcp.save(dict(zip(("model", "optim"), get_state_dict(model, optimizer), strict=True)), checkpoint_id=f"{folder}/fsdp")
    torch.manual_seed(0)
    plain = transformers.AutoModelForCausalLM.from_config(_config())
    plain_optimizer = torch.optim.AdamW(plain.parameters(), lr=1e-4, fused=True)
    _step(plain, plain_optimizer)
    dcp.save(dict(zip(("model", "optim"), get_state_dict(plain, plain_optimizer), strict=True)), checkpoint_id=f"{folder}/ddp")
    dist.destroy_process_group()


def main(world: int) -> int:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as root:
        mp.spawn(_save_on_rank, args=(world, _free_port(), root), nprocs=world)
        differ = 0
        for scheme, fsdp in (("fsdp", "full"), ("ddp", "no")):
            folder = Path(root) / scheme
            with mock.patch.object(dcp_files, "DCP_CHECKPOINT_PATH", str(folder)):
                report = checkpoint(_config(), seq_len=_SEQ, device="cpu", gpus=world, fsdp=fsdp, save_format="dcp")
            for file in report.files:
                real = os.path.getsize(folder / file.name)
                differ += real != file.bytes
                print(f"{scheme:5} {file.name:14} real {real:>9,}  vramsim {file.bytes:>9,}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
