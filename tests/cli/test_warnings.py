"""Options taken as given but easy to misread: each one ``vramsim: warning:`` line, in the config's warnings
and the report's."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers
from cli_runs import run, saved_config

import vramsim
from vramsim.config import SimulationConfig

MISSING = "no-such-org/no-such-model"
"""A model found missing only once the work starts: the warnings come first, with no trace to wait for."""

WARNED = {
    "zero without gpus": (
        ["--zero", "3"],
        "vramsim: warning: --zero 3 shards over the data-parallel ranks, and --gpus 1 leaves 1: nothing is sharded; "
        "give --gpus N",
    ),
    "fsdp without gpus": (["--fsdp", "full"], "vramsim: warning: --fsdp full shards over the data-parallel ranks"),
    "checkpointing none beside gradient checkpointing": (
        ["--checkpointing", "none", "--gradient-checkpointing"],
        "vramsim: warning: --gradient-checkpointing is --checkpointing full; it overrides the --checkpointing none given",
    ),
    "a100 is the 80 GB card": (
        ["--device", "a100"],
        "vramsim: warning: --device a100 is the a100-80gb (NVIDIA A100-SXM4-80GB); the a100-40gb and a100-40gb-pcie "
        "hold less: name the card you have (vramsim gpus lists them)",
    ),
    "v100 is the 32 GB card": (["--device", "v100"], "vramsim: warning: --device v100 is the v100-32gb"),
}


@pytest.mark.parametrize("case", sorted(WARNED))
def test_each_misreadable_option_warns_in_one_line(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv, line = WARNED[case]
    code, _, err = run(capsys, "trace", MISSING, *argv)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 2 and lines[0].startswith(line) and lines[1].startswith("vramsim: error: ")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--gpus", "2", "--zero", "3"],
        ["--gradient-checkpointing"],
        ["--checkpointing", "full", "--gradient-checkpointing"],
        ["--device", "h100"],  # the default: h100-sxm, and the PCIe card holds as much
        ["--device", "a100-40gb"],
        ["--device", "h100-80gb"],
    ],
)
def test_what_reads_as_meant_does_not_warn(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "trace", MISSING, *argv)
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith("vramsim: error: ")


def test_the_config_keeps_its_warnings_and_the_report_lists_them(
    tmp_path: Path, tiny_gpt2: transformers.GPT2Config, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python sees the same warnings: SimulationConfig.warnings, then the report's; the CLI prints each once."""
    config = SimulationConfig.from_options(device="a100", zero=2)
    assert [w.split(" ", 1)[0] for w in config.warnings] == ["device='a100'", "zero=2"]
    report = vramsim.simulate(tiny_gpt2, seq_len=16, device="a100", zero=2)
    assert report.warnings[:2] == list(config.warnings)
    code, _, err = run(capsys, "trace", saved_config(tmp_path, tiny_gpt2), "--seq-len", "16", "--device", "a100", "--zero", "2")
    assert code == 0 and err.count("vramsim: warning: --device a100 is") == 1 and err.count("--zero 2 shards") == 1
