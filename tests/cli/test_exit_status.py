"""Exit statuses: 2 for a bad argument, answered before torch loads; 1 for an error found later."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_runs import run


def _imported(argv: list[str]) -> tuple[int, str, set[str]]:
    """``vramsim *argv`` in a fresh interpreter under ``-X importtime``: its status, stderr, the modules it imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vramsim.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = result.stderr.splitlines()
    modules = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    told = "\n".join(line for line in lines if not line.startswith("import time:"))
    return result.returncode, told, modules


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trace", "gpt2", "--zero", "7"], "vramsim: error: unknown ZeRO stage 7; choose one of: 0, 1, 2, 3"),
        (["trace", "gpt2", "--batch-size", "-1"], "vramsim: error: --batch-size must be between 1 and 1048576, got -1"),
        (["fit", "gpt2", "--dtype", "int3"], "vramsim: error: unsupported --dtype int3; choose one of: float32, fp32"),
        (["trace", "gpt2", "--device", "a1000"], "vramsim: error: unknown device 'a1000'"),
        (["checkpoint", "gpt2", "--save-format", "zip"], "vramsim: error: unknown save format 'zip'; choose one of:"),
        (["checkpoint", "gpt2", "--map-location", "gpu"], "vramsim: error: unknown map location 'gpu'; choose one of:"),
        (["checkpoint", "gpt2", "--task", "generate"], "vramsim: error: a training checkpoint holds optimizer state"),
        (
            ["trace", "gpt2", "--inputs", "no/such/feed.py:feed"],
            "vramsim: error: --inputs no/such/feed.py:feed: no/such/feed.py does not exist; pass path/to/file.py:function",
        ),
        (
            ["trace", "gpt2", "--loss", "no/such/loss.py:loss"],
            "vramsim: error: --loss no/such/loss.py:loss: no/such/loss.py does not exist; pass path/to/file.py:function",
        ),
        (["trace", "gpt2", "--loss", "no/such/loss.py"], "vramsim: error: --loss no/such/loss.py names no function"),
    ],
)
def test_a_bad_argument_exits_2_without_importing_torch(argv: list[str], message: str) -> None:
    """The config's checks run on the parsed arguments before anything imports torch (the 12 s the old order
    spent on an argument error was torch's and transformers' import)."""
    code, err, modules = _imported(argv)
    assert code == 2, err
    assert err.startswith(message) and err.count("\n") == 0
    assert "vramsim.config" in modules and not {"torch", "transformers"} & modules


def test_gpus_imports_no_torch() -> None:
    """The catalog is data: listing it loads neither torch nor transformers."""
    code, err, modules = _imported(["gpus"])
    assert code == 0, err
    assert "vramsim.views.devices" in modules and not {"torch", "transformers"} & modules


def test_models_imports_no_torch() -> None:
    """Which pipelines train is data (workload/diffusion/scripts.py): the listing loads no torch, transformers or
    diffusers (it took ~20 s here importing them; ~0.5 s without)."""
    code, err, modules = _imported(["models"])
    assert code == 0, err
    assert "vramsim.workload.diffusion.scripts" in modules
    assert not {"torch", "transformers", "diffusers"} & modules


def test_an_error_found_later_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """A model that cannot be found is no bad value of a flag: it is found once the work starts."""
    code, out, err = run(capsys, "trace", "no-such-org/no-such-model", "--seq-len", "16")
    assert (code, out) == (1, "")
    assert err.startswith("vramsim: error: 'no-such-org/no-such-model' is neither a bundled model")


def test_argparse_refusals_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        run(capsys, "trace", "gpt2", "--batch-size", "many")
    assert exit.value.code == 2
    assert "invalid int value: 'many'" in capsys.readouterr().err
