"""``--html PATH`` on trace, serve, checkpoint and fit writes one self-contained page; ``--json --timeline``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_runs import run

PLOTLY_BUNDLE = "plotly.js v"
"""The banner of plotly's inlined script: a page holds it once."""


def assert_self_contained(page: str) -> None:
    """No script or other element loads anything over the network, and plotly is inlined once."""
    assert not re.search(r"<script[^>]*\ssrc=", page)
    assert not re.search(r"""\ssrc=["']?(https?:)?//""", page)
    assert page.count(PLOTLY_BUNDLE) == 1


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["trace", "gpt2", "--seq-len", "64", "--device", "h100"], ["Memory over the steady-state step", "Per layer"]),
        (["serve", "gpt2", "--device", "rtx-4090", "--max-model-len", "512", "--max-num-batched-tokens", "512"], ["Budget"]),
        (
            ["checkpoint", "gpt2", "--seq-len", "16", "--device", "h100"],
            ["The restore over time", "On disk", "model.safetensors"],
        ),
        (["fit", "gpt2", "--seq-len", "64", "--device", "rtx-4090"], ["The largest that fit", "--batch-size"]),
    ],
    ids=["trace", "serve", "checkpoint", "fit"],
)
def test_html_page(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], words: list[str]) -> None:
    """Each command writes its page, says where on stderr, and prints its usual view."""
    path = tmp_path / "report.html"
    code, out, err = run(capsys, *argv, "--html", str(path), "--quiet")
    assert code == 0, err
    assert f"vramsim: wrote {path}" in err and out
    page = path.read_text()
    assert_self_contained(page)
    assert all(word in page for word in words)


def test_json_includes_the_timeline_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["trace", "meta-llama/Llama-3.2-1B", "--seq-len", "32", "--device", "h100", "--task", "forward", "--quiet", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "timeline" not in json.loads(out)
    code, out, err = run(capsys, *argv, "--timeline")
    assert code == 0, err
    data = json.loads(out)
    timeline = data["timeline"]
    assert max(p["allocated_bytes"] for p in timeline["points"]) == data["peak_bytes"]
    assert len(timeline["points"]) == timeline["last_event"] - timeline["first_event"] + 1  # a short step: every event
    assert [span["phase"] for span in timeline["phases"]] == ["forward"]
    assert {"event", "categories", "op", "module", "phase", "shape", "dtype"} <= set(timeline["points"][0])


def test_timeline_needs_json(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before tracing, in one line."""
    code, _, err = run(capsys, "trace", "gpt2", "--timeline")
    assert code == 2
    assert err == "vramsim: error: --timeline adds the timeline to --json's output; give --json too (--html draws it anyway)\n"


def test_html_folder_must_exist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "trace", "gpt2", "--html", str(tmp_path / "missing" / "r.html"))
    assert code == 2
    assert "does not exist; create it or choose another path" in err
