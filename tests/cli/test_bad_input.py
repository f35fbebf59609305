"""Bad input through the CLI: each case exits non-zero with one ``vramsim: error:`` line and nothing else.

Every case runs in-process through ``vramsim.cli.main`` under a time and memory watch: a bad
input must be refused quickly, before anything large is built.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vramsim.cli import main
from vramsim.workload.guards import MAX_LAYERS

SECONDS = 60
"""Longest a refusal may take (most take well under a second)."""
GROWTH_BYTES = 2 << 30
"""Most the process's peak memory may grow while refusing one input."""


def _file(name: str, content: str | bytes) -> Callable[[Path], str]:
    def make(tmp_path: Path) -> str:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return str(path)

    return make


def _config(**fields: object) -> Callable[[Path], str]:
    base = {
        "model_type": "llama",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "num_key_value_heads": 2,
        "vocab_size": 100,
    }
    base.update(fields)
    return _file("config.json", json.dumps(base))


def _folder_without_config(tmp_path: Path) -> str:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "README.md").write_text("weights elsewhere\n")
    return str(tmp_path / "model")


def _id(model: str) -> Callable[[Path], str]:
    return lambda _: model


GPT2 = _id("gpt2")
TINY = _config()

# case -> (model, extra CLI arguments)
CASES: dict[str, tuple[Callable[[Path], str], list[str]]] = {
    # files that are not configs
    "malformed json": (_file("config.json", "{not json"), []),
    "empty file": (_file("config.json", ""), []),
    "binary file": (_file("config.json", bytes(range(256)) * 4), []),
    "json list": (_file("config.json", "[1, 2, 3]"), []),
    "json string": (_file("config.json", '"llama"'), []),
    "no model_type": (_file("config.json", '{"hidden_size": 8}'), []),
    "unknown model_type": (_config(model_type="no-such-architecture"), []),
    "python file": (_file("model.py", "import torch\nmodel = torch.nn.Linear(2, 2)\n"), []),
    "folder without config.json": (_folder_without_config, []),
    "missing path": (lambda tmp: str(tmp / "nowhere" / "config.json"), []),
    "unknown id": (_id("no-such-org/no-such-model"), []),
    "empty model name": (_id(""), []),
    # absurd or wrong sizes in the config
    "a million layers": (_config(num_hidden_layers=10**6), []),
    "layers over the bound": (_config(num_hidden_layers=MAX_LAYERS + 1), []),
    "hidden size 1e9": (_config(hidden_size=10**9, intermediate_size=10**9), []),
    "vocab 1e13": (_config(vocab_size=10**13), []),
    "negative layers": (_config(num_hidden_layers=-3), []),
    "zero hidden size": (_config(hidden_size=0), []),
    "hidden size as text": (_config(hidden_size="big"), []),
    "heads do not divide": (_config(num_key_value_heads=3), ["--seq-len", "4"]),
    # absurd or wrong options
    "batch 0": (TINY, ["--batch-size", "0"]),
    "negative batch": (TINY, ["--batch-size", "-1"]),
    "batch as text": (TINY, ["--batch-size", "two"]),
    "seq 1e9": (TINY, ["--seq-len", str(10**9)]),
    "seq 0": (TINY, ["--seq-len", "0"]),
    "seq as float": (TINY, ["--seq-len", "1.5"]),
    "unknown device": (TINY, ["--device", "tpu9"]),
    "unknown task": (TINY, ["--task", "serve"]),
    "unknown dtype": (TINY, ["--dtype", "int3"]),
    "unknown mixed precision": (TINY, ["--mixed-precision", "fp8"]),
    "unknown optimizer": (TINY, ["--optimizer", "lamb"]),
    "negative headroom": (TINY, ["--headroom", "-0.1"]),
    "headroom of 1.5": (TINY, ["--headroom", "1.5"]),
    "headroom nan": (TINY, ["--headroom", "nan"]),
    "unknown flag": (TINY, ["--frobnicate"]),
    "unknown model class": (TINY, ["--model-class", "NoSuchModelForCausalLM"]),
    "lora rank 0": (TINY, ["--lora-rank", "0"]),
    "negative max new tokens": (TINY, ["--task", "generate", "--max-new-tokens", "-1"]),
    "unknown moe routing": (TINY, ["--moe-routing", "random"]),
    "capacity below 1": (TINY, ["--moe-routing", "capacity:0.5"]),
    "compile with generate": (TINY, ["--compile", "--task", "generate"]),
    "compile with checkpointing": (TINY, ["--compile", "--checkpointing", "full"]),
    "compile with offload": (TINY, ["--compile", "--checkpointing", "offload"]),
    "compile with ddp": (TINY, ["--compile", "--gpus", "2"]),
}


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse refuses malformed arguments itself
        code = exit_info.code if isinstance(exit_info.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_in_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, extra = CASES[case]
    argv = ["trace", model(tmp_path), "--device", "cpu", *extra]
    if "--device" in extra:
        argv = ["trace", model(tmp_path), *extra]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.monotonic()
    code, out, err = _run(capsys, argv)
    elapsed = time.monotonic() - started
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert code != 0, f"{case}: exit code 0"
    assert out == "", f"{case}: printed on stdout: {out[:200]!r}"
    assert err.startswith("vramsim: error: ") and err.count("\n") == 1 and err.endswith("\n"), f"{case}: {err!r}"
    assert elapsed < SECONDS, f"{case}: took {elapsed:.0f} s"
    assert grown < GROWTH_BYTES, f"{case}: peak memory grew by {grown >> 20} MiB"


def test_there_are_at_least_30_cases() -> None:
    assert len(CASES) >= 30


def test_no_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, [])
    assert code != 0 and out == "" and err.startswith("vramsim: error: ") and err.count("\n") == 1


def test_validate_on_a_gpu_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["validate", "gpt2", "--device", "h100", "--seq-len", "8"])
    assert code != 0 and out == "" and err.startswith("vramsim: error: ") and err.count("\n") == 1


GUARDED_CONFIGS = {
    "a million layers": {"num_hidden_layers": 10**6},
    "layers over the bound": {"num_hidden_layers": MAX_LAYERS + 1},
    "hidden size 1e9": {"hidden_size": 10**9, "intermediate_size": 10**9},
    "vocab 1e13": {"vocab_size": 10**13},
    "negative layers": {"num_hidden_layers": -3},
    "zero hidden size": {"hidden_size": 0},
    "experts as text": {"num_local_experts": "eight"},
}


@pytest.mark.parametrize("case", sorted(GUARDED_CONFIGS))
def test_guard_refuses_absurd_configs(case: str) -> None:
    import transformers

    from vramsim.errors import ConfigError
    from vramsim.workload.guards import check_config

    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_hidden_layers=1)
    for key, value in GUARDED_CONFIGS[case].items():
        setattr(config, key, value)
    with pytest.raises(ConfigError) as refused:
        check_config(config)
    assert "\n" not in str(refused.value)


def test_guard_accepts_every_bundled_model() -> None:
    from vramsim import model_zoo
    from vramsim.workload.guards import check_config
    from vramsim.workload.models import load_config

    for model_id in model_zoo.model_ids():
        check_config(load_config(model_id))
