"""``trace --memory-viz`` and ``--chrome-trace``: the files written, the lines saying where, the refusals."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import transformers
from cli_runs import run


@pytest.fixture
def tiny(tmp_path: Path, tiny_llama: transformers.LlamaConfig) -> str:
    path = tmp_path / "config.json"
    tiny_llama.to_json_file(path)
    return str(path)


def test_trace_writes_both_files_and_says_where(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON report stays alone on stdout; stderr names each file and how to open it."""
    snapshot, trace = tmp_path / "snapshot.pickle", tmp_path / "trace.json"
    code, out, err = run(
        capsys,
        "trace",
        tiny,
        "--device",
        "h100-sxm",
        "--seq-len",
        "32",
        "--memory-viz",
        str(snapshot),
        "--chrome-trace",
        str(trace),
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["memory_history"]["actions"]
    assert f"vramsim: wrote {snapshot} (drop it on https://pytorch.org/memory_viz" in err
    assert f"vramsim: wrote {trace} (open it in https://ui.perfetto.dev" in err
    assert set(pickle.loads(snapshot.read_bytes())) == {"segments", "device_traces", "allocator_settings"}
    assert json.loads(trace.read_text())["traceEvents"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--memory-viz", "{tmp}/missing/snapshot.pickle"],
            "--memory-viz {tmp}/missing/snapshot.pickle: the folder {tmp}/missing does not exist",
        ),
        (["--chrome-trace", "{tmp}/trace.json", "--device", "cpu"], "the cpu target has none: name a GPU (--device)"),
    ],
    ids=["missing folder", "cpu target"],
)
def test_a_refusal_is_one_line(
    flags: list[str], message: str, tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "trace", tiny, "--seq-len", "16", *(flag.format(tmp=tmp_path) for flag in flags))
    assert code == 2 and out == ""
    assert err.startswith("vramsim: error: ") and message.format(tmp=tmp_path) in err and err.count("\n") == 1
    assert not (tmp_path / "trace.json").exists()
