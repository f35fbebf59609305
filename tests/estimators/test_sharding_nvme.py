"""ZeRO-Infinity's NVMe offload: the device as with host offload, host memory holding DeepSpeed's pinned swap pools."""

from __future__ import annotations

import json
from math import ceil
from pathlib import Path
from typing import Any

import transformers

import vramsim
from vramsim.estimators.sharding.nvme import sub_groups

_LLAMA = transformers.LlamaConfig(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=4000,
    max_position_embeddings=256,
)


def _ds(tmp_path: Path, name: str, devices: tuple[str, str], **settings: Any) -> str:
    """A ds_config: ZeRO-3 offloading the optimizer and the weights to ``devices``, with ``settings`` in its sections."""
    zero = {
        "stage": 3,
        "offload_optimizer": {"device": devices[0], **settings.pop("optimizer", {})},
        "offload_param": {"device": devices[1], **settings.pop("param", {})},
        **settings.pop("zero", {}),
    }
    path = tmp_path / name
    path.write_text(json.dumps({"zero_optimization": zero, **settings}))
    return str(path)


def test_sub_groups_close_as_deepspeed_closes_them() -> None:
    """``_create_fp16_sub_groups``: a group closes once it reaches the size; the last keeps the remainder."""
    assert sub_groups([5, 5, 5], 100) == [15]
    assert sub_groups([4, 4, 4, 4, 1], 8) == [8, 8, 1]
    assert sub_groups([10, 1, 1], 3) == [10, 2]


def test_nvme_keeps_the_device_and_moves_the_states_out_of_host_memory(tmp_path: Path) -> None:
    """Closed forms of deepspeed 0.19.8's swap buffers, on 2 ranks of a 3.4M-parameter Llama with fp32 weights."""
    options = {"gpus": 2, "seq_len": 64, "device": "h100"}
    host = vramsim.simulate(_LLAMA, deepspeed=_ds(tmp_path, "cpu.json", ("cpu", "cpu")), **options)
    nvme = vramsim.simulate(
        _LLAMA,
        deepspeed=_ds(
            tmp_path,
            "nvme.json",
            ("nvme", "nvme"),
            optimizer={"buffer_count": 3},
            aio={"intra_op_parallelism": 2},
            param={"buffer_count": 2, "buffer_size": 1000, "max_in_cpu": 100_000},
            zero={"sub_group_size": 150_000},
        ),
        **options,
    )
    assert host.ranks is not None and nvme.ranks is not None
    assert (nvme.device_bytes, nvme.peak_bytes) == (host.device_bytes, host.peak_bytes)  # the device never sees NVMe
    shares = [ceil(p.numel() / 2) for p in transformers.LlamaForCausalLM(_LLAMA).parameters()]
    groups = sub_groups(shares, 150_000)
    small = [g for g in groups if 4 * g < 1 << 20]  # under min_aio_bytes: not swappable, kept in host memory
    assert len(small) < len(groups) > 2 and small  # several sub-groups, some too small to swap
    master = 4 * sum(shares)
    partitions = host.ranks.host["parameters"] - master
    pools = 3 * ceil(max(groups) / 512) * 512 * 4 + 2 * 1024 * 4  # alignment: 1,024 B x 2 threads / 4 B; 1,000 -> 1,024
    assert nvme.ranks.host["swap_buffers"] == pools
    assert nvme.ranks.host["gradients"] == 4 * sum(small)
    assert nvme.ranks.host["parameters"] == 4 * sum(small) + 100_000 * 4  # unswapped master, max_in_cpu elements
    assert partitions > 100_000 * 4
    assert nvme.ranks.host["optimizer_states"] == host.ranks.host["optimizer_states"] - (
        host.ranks.host["optimizer_states"] * (sum(shares) - sum(small)) // sum(shares)
    )


def test_bf16_mode_swaps_the_weights_in_bf16(tmp_path: Path) -> None:
    """DeepSpeed's bf16 mode holds bf16 weights: the parameter pool is 5 x 1e8 bf16 elements (the defaults), aligned."""
    nvme = vramsim.simulate(
        _LLAMA, deepspeed=_ds(tmp_path, "nvme.json", ("nvme", "nvme")), gpus=2, seq_len=64, device="h100", mixed_precision="bf16"
    )
    assert nvme.ranks is not None
    total = sum(ceil(p.numel() / 2) for p in transformers.LlamaForCausalLM(_LLAMA).parameters())  # one sub-group
    assert nvme.ranks.host["swap_buffers"] == 4 * ceil(total / 256) * 256 * 4 + 5 * ceil(1e8 / 512) * 512 * 2  # 1 KiB blocks
