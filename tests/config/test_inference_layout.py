"""Inference over several GPUs is one model split over them: --gpus N alone is device_map auto, DDP replicas and
layouts that would need them are refused in one line naming the alternatives."""

from __future__ import annotations

from typing import Any

import pytest

from vramsim.cli import main
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError

GENERATE = {"task": "generate", "device": "h100"}


def test_gpus_alone_on_generate_is_device_map_auto_and_no_data_parallel_ranks() -> None:
    config = SimulationConfig.from_options(gpus=2, **GENERATE)
    assert config.device_map == "auto" and not config.sharding.active


def test_training_over_gpus_stays_ddp() -> None:
    config = SimulationConfig.from_options(task="train", gpus=2, device="h100")
    assert config.device_map is None and config.sharding.scheme == "DDP"


def test_max_memory_takes_one_size_or_one_per_gpu() -> None:
    assert SimulationConfig.from_options(gpus=2, max_memory="20GiB", **GENERATE).max_memory == (20 * 2**30,) * 2
    assert SimulationConfig.from_options(gpus=2, max_memory="1GB,2GB", **GENERATE).max_memory == (10**9, 2 * 10**9)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"dp": 2}, ConfigError, "dp=2 would be DDP replicas.*--device-map auto .* or --tp N"),
        ({"gpus": 4, "tp": 2}, ConfigError, "would be 2 DDP replicas.*give gpus=2, or --device-map auto"),
        ({"gpus": 2, "device_map": "everywhere"}, ConfigError, "unknown device_map 'everywhere'; choose one of: auto"),
        ({"gpus": 2, "max_memory": "1GiB,2GiB,3GiB"}, ConfigError, "3 sizes for gpus=2"),
        ({"gpus": 2, "max_memory": "lots"}, ConfigError, "sizes such as 20GiB"),
        ({"device_map": "auto"}, ConfigError, "over one GPU"),
        ({"gpus": 2, "device": "cpu"}, ConfigError, "name a GPU"),
        ({"gpus": 2, "device_map": "auto", "tp": 2}, UnsupportedError, "device_map with tp"),
        ({"task": "train", "gpus": 2, "device_map": "auto"}, ConfigError, "training over GPUs is --gpus"),
        ({"ep": 2}, UnsupportedError, "--tp N splits each expert"),
    ],
)
def test_refused_in_one_line(options: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        SimulationConfig.from_options(**{**GENERATE, **options})


def test_the_cli_refuses_ddp_for_generate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "gpt2", "--task", "generate", "--dp", "2"]) == 2  # a bad argument
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "DDP replicas" in err and "--device-map auto" in err
