"""Every command's --help: a default told once and only where there is one, only choices that are taken, one
flag per idea (old spellings still taken, with a warning naming the new one)."""

from __future__ import annotations

import re

import pytest
from cli_runs import run

from vramsim.cli.arguments import build_parser, subparser, workload_options
from vramsim.config import SimulationConfig
from vramsim.config.serving import ServeConfig
from vramsim.config.workload import ATTN_IMPLEMENTATIONS
from vramsim.errors import ConfigError, UnsupportedError

COMMANDS = ("trace", "validate", "fit", "checkpoint", "serve", "compare", "plan", "models", "gpus")


def _help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit:
        run(capsys, command, "--help")
    assert exit.value.code == 0
    return capsys.readouterr().out


def _entries(text: str) -> dict[str, str]:
    """Each flag's help, its lines joined: ``--lora-alpha`` -> ``LoRA alpha (peft's lora_alpha); default 2r``."""
    entries: dict[str, str] = {}
    flag = ""
    for line in text.split("options:", 1)[1].splitlines():
        found = re.match(r"  (-[-\w]+)", line)
        if found:
            flag = found[1]
            line = line[found.end() :]
        if flag:
            entries[flag] = " ".join((entries.get(flag, "") + " " + line.strip()).split())
    return entries


@pytest.mark.parametrize("command", COMMANDS)
def test_help_tells_each_default_once(command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No "(default: None)" after prose giving the real default (``--lora-alpha``: 2r), no default said twice
    (``serve --gpus``: "default: --tp x --pp"), every line within 80 columns."""
    text = _help(capsys, monkeypatch, command)
    assert "(default: None)" not in text and "(default: False)" not in text
    assert max(map(len, text.splitlines())) <= 80
    for flag, entry in _entries(text).items():
        assert len(re.findall(r"default:", entry)) <= 1, (flag, entry)
    if command in ("trace", "fit"):
        entries = _entries(text)
        assert entries["--lora-alpha"].endswith("default 2r")
        assert entries["--task"].endswith("else train") and entries["--optimizer"].endswith(
            "none given: the recipe's (the Trainer's: adamw)"
        )
    if command == "serve":
        assert _entries(text)["--gpus"] == "GPUS GPUs in the deployment (default: --tp x --pp)"


@pytest.mark.parametrize("command", ["trace", "fit", "validate", "checkpoint"])
def test_attention_choices_listed_are_taken(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kernel --attn-implementation lists is one the config takes; flex_attention, refused, is not listed."""
    entry = _entries(_help(capsys, monkeypatch, command))["--attn-implementation"]
    listed = re.findall(r"\b(eager|sdpa|flash_attention_\d|flex_attention)\b", entry.split(";")[0])
    assert listed == list(ATTN_IMPLEMENTATIONS) and "flex_attention" not in entry
    for name in listed:
        SimulationConfig.from_options(attn_implementation=name)
    with pytest.raises(UnsupportedError, match="flex_attention refuses meta tensors"):
        SimulationConfig.from_options(attn_implementation="flex_attention")


def test_offload_choices_listed_are_taken(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--offload names both CPU offloads; each choice argparse lists makes a config (on a GPU target, training)."""
    parser = build_parser()
    action = next(a for a in subparser(parser, "trace")._actions if "--offload" in a.option_strings)
    assert action.choices == ("none", "model", "sequential", "optimizer", "params")
    for choice in action.choices:  # the model states' offloads apply to sharded states
        argv = ["trace", "gpt2", "--gpus", "2", "--zero", "3", "--offload", choice]
        SimulationConfig.from_options(**workload_options(parser.parse_args(argv)))
    saved = next(a for a in subparser(parser, "checkpoint")._actions if "--offload" in a.option_strings)
    assert saved.choices == ("none", "optimizer", "params")  # a checkpoint is a single model's


def test_checkpoint_offers_no_pipeline_flags(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``checkpoint`` saves a single model's training state: none of the diffusion pipelines' flags."""
    offered = _entries(_help(capsys, monkeypatch, "checkpoint"))
    trace = _entries(_help(capsys, monkeypatch, "trace"))
    pipeline = {"--height", "--width", "--num-inference-steps", "--vae-tiling", "--ema", "--cache-latents", "--num-frames"}
    assert pipeline <= set(trace) and not pipeline & set(offered)
    assert "model (enable_model_cpu_offload" in trace["--offload"] and "enable_model" not in offered["--offload"]


def test_offload_states_is_now_offload(capsys: pytest.CaptureFixture[str]) -> None:
    """The old flag sets the same options as the new one, with one warning line naming it."""
    parser = build_parser()
    old = parser.parse_args(["trace", "gpt2", "--gpus", "2", "--zero", "2", "--offload-states", "optimizer"])
    new = parser.parse_args(["trace", "gpt2", "--gpus", "2", "--zero", "2", "--offload", "optimizer"])
    assert workload_options(old) == workload_options(new)
    assert workload_options(new)["offload_states"] == "optimizer" and workload_options(new)["offload"] == "no"
    code, _, err = run(
        capsys, "trace", "no-such-org/no-such-model", "--gpus", "2", "--zero", "2", "--offload-states", "optimizer"
    )
    assert code == 1 and err.splitlines()[0] == ("vramsim: warning: --offload-states is now --offload; give --offload optimizer")


def test_serve_bitsandbytes_is_now_nf4_dq(capsys: pytest.CaptureFixture[str]) -> None:
    """``serve --quantization`` names vLLM's bitsandbytes as trace names its format, nf4-dq; the old name warns."""
    code, _, err = run(capsys, "serve", "no-such-org/no-such-model", "--quantization", "bitsandbytes")
    assert code == 1 and err.splitlines()[0] == ("vramsim: warning: --quantization bitsandbytes is now --quantization nf4-dq")
    assert ServeConfig(quantization="nf4-dq").quantization == ServeConfig(quantization="bitsandbytes").quantization
    with pytest.raises(ConfigError, match="choose one of: fp8, gptq, awq, nf4-dq"):
        ServeConfig(quantization="nf4")
