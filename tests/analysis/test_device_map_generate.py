"""Generation over several GPUs is one model placed by a device map, never DDP replicas: each GPU holds its
modules' weights and its layers' KV cache, the report gives the busiest GPU and lists every one."""

from __future__ import annotations

import pytest
import transformers

import vramsim
from vramsim.workload.models import build_model

OPTIONS = {"task": "generate", "batch_size": 2, "seq_len": 32, "max_new_tokens": 4, "device": "h100"}


@pytest.fixture(scope="module")
def gpt2() -> transformers.GPT2Config:
    return transformers.GPT2Config(
        n_layer=6, n_embd=256, n_head=4, vocab_size=2000, n_positions=128, bos_token_id=0, eos_token_id=0
    )


@pytest.fixture(scope="module")
def placed(gpt2: transformers.GPT2Config) -> vramsim.Report:
    """--gpus 2 and nothing else: device_map auto."""
    return vramsim.simulate(gpt2, gpus=2, **OPTIONS)


def test_gpus_alone_is_device_map_auto_with_no_gradient_buckets(placed: vramsim.Report) -> None:
    ranks = placed.ranks
    assert ranks is not None and ranks.scheme == "device_map auto" and placed.options["device_map"] == "auto"
    assert not ranks.buffers  # no DDP buckets, no NCCL: a device map's copies are peer-to-peer
    names = {a.name for a in placed.assumptions}
    assert "device_map" in names and not names & {"ddp_gradient_buckets", "data_parallel_ranks_alike"}
    assert not any(a.name.startswith("NCCL") for a in placed.assumptions)


def test_each_gpu_holds_its_modules_weights_once_between_them(gpt2: transformers.GPT2Config, placed: vramsim.Report) -> None:
    model = build_model(gpt2, device="meta", dtype=None)
    whole = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))  # tied wte/lm_head once
    devices = placed.ranks.devices  # type: ignore[union-attr]
    assert [d.device for d in devices] == [0, 1] and all(d.parameter_bytes for d in devices)
    assert sum(d.parameter_bytes for d in devices) == whole
    assert placed.ranks.busiest_device == max(devices, key=lambda d: d.device_bytes).device  # type: ignore[union-attr]
    assert placed.device_bytes == max(d.device_bytes for d in devices)


def test_a_layers_kv_cache_lives_on_its_gpu(gpt2: transformers.GPT2Config, placed: vramsim.Report) -> None:
    """Each GPU holds the cache of its own layers only: more layers, more cache, none past one layer's whole share."""
    devices = placed.ranks.devices  # type: ignore[union-attr]
    layers = [sum(m.startswith("transformer.h.") for m in d.modules) for d in devices]
    assert sum(layers) == gpt2.n_layer and all(layers)
    # one layer's K and V for the whole generation: (batch, heads, prompt + new tokens - 1, head_dim) float32
    head_dim = gpt2.n_embd // gpt2.n_head
    layer = 2 * OPTIONS["batch_size"] * gpt2.n_head * (OPTIONS["seq_len"] + OPTIONS["max_new_tokens"] - 1) * head_dim * 4
    for device, count in zip(devices, layers, strict=True):
        assert (count - 1) * layer < device.kv_cache_bytes <= (count + 1) * layer


def test_the_busiest_gpu_holds_less_than_one_gpu_does(gpt2: transformers.GPT2Config, placed: vramsim.Report) -> None:
    one = vramsim.simulate(gpt2, **OPTIONS)
    assert placed.peak_bytes < one.peak_bytes


def test_a_given_max_memory_moves_the_split(gpt2: transformers.GPT2Config, placed: vramsim.Report) -> None:
    """GPU 0 offered 8 MiB (the embeddings and room for the largest layer) holds fewer layers than the balance gives it."""
    report = vramsim.simulate(gpt2, gpus=2, device_map="auto", max_memory="8MiB,1GiB", **OPTIONS)
    first = [d.modules for d in (report.ranks.devices[0], placed.ranks.devices[0])]  # type: ignore[union-attr]
    assert len(first[0]) < len(first[1])
    assert report.ranks.devices[0].max_memory_bytes == 8 * 2**20  # type: ignore[union-attr]
