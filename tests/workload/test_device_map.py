"""The device map vramsim places an inference model by is accelerate's own infer_auto_device_map, fed the
balanced max_memory from_pretrained(device_map="auto") computes."""

from __future__ import annotations

import accelerate
import pytest
import torch
from transformers.integrations.accelerate import get_balanced_memory

from vramsim.errors import UnsupportedError
from vramsim.estimators.assumptions import CUDA_CONTEXT_BYTES
from vramsim.workload.models import build_model, load_config
from vramsim.workload.parallel.device_map import device_placement, free_memory
from vramsim.workload.targets import resolve_target

GiB = 2**30


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return build_model(load_config("meta-llama/Llama-3.2-1B"), device="meta", dtype=torch.bfloat16)


def _accelerates_map(model: torch.nn.Module, max_memory: dict[int, int]) -> dict[str, int | str]:
    """from_pretrained's two calls, made here by hand: balance, then accelerate's placement."""
    no_split = list(model._no_split_modules)
    balanced = get_balanced_memory(model, max_memory=dict(max_memory), no_split_module_classes=no_split)
    return dict(accelerate.infer_auto_device_map(model, max_memory=balanced, no_split_module_classes=no_split))


def test_the_map_is_accelerates_for_a_given_max_memory(llama: torch.nn.Module) -> None:
    """Llama-3.2-1B (2.30 GiB of bf16 weights) over 2 GPUs of 2 GiB each: accelerate's map, layers in order."""
    placement = device_placement(llama, "auto", 2, (2 * GiB, 2 * GiB), resolve_target("h100"))
    assert placement.device_map == _accelerates_map(llama, {0: 2 * GiB, 1: 2 * GiB})
    layers = [placement.device_map[f"model.layers.{i}"] for i in range(16)]
    assert layers == sorted(layers) and set(layers) == {0, 1}
    assert placement.device_map["lm_head"] == placement.device_map["model.embed_tokens"] == 0  # tied: placed together
    assert placement.max_memory[1] == 2 * GiB  # the last GPU keeps all it offered; GPU 0 is capped by the balance


def test_no_max_memory_offers_each_gpus_free_memory_after_its_context(llama: torch.nn.Module) -> None:
    """As get_max_memory reads torch.cuda.mem_get_info: 79.18 GiB of an H100 less the bare hopper context; balanced,
    GPU 0 takes layers 0-9 (it keeps room for the largest layer), GPU 1 the rest."""
    target = resolve_target("h100")
    free = free_memory(target)
    assert free == target.profile.memory_bytes - CUDA_CONTEXT_BYTES["hopper"]
    placement = device_placement(llama, "auto", 2, None, target)
    assert placement.device_map == _accelerates_map(llama, {0: free, 1: free})
    assert [placement.device_map[f"model.layers.{i}"] for i in (9, 10)] == [0, 1]


def test_weights_that_do_not_fit_are_refused_not_offloaded(llama: torch.nn.Module) -> None:
    with pytest.raises(UnsupportedError, match=r"offloads .* to the CPU or disk"):
        device_placement(llama, "auto", 2, (GiB // 2, GiB // 2), resolve_target("h100"))
