"""``vramsim sweep``: its axes from the command line, the table, CSV and JSON, and a bad range in one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import transformers

from vramsim.cli import main

AXES = ["--batch-size", "1,2", "--seq-len", "16:32:x2", "--device", "h100", "--checkpointing", "none,full", "--jobs", "1"]


@pytest.fixture
def tiny(tmp_path: Path, tiny_llama: transformers.LlamaConfig) -> str:
    path = tmp_path / "config.json"
    tiny_llama.to_json_file(path)
    return str(path)


def test_the_table_csv_and_json_agree(tiny: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every point once per checkpointing choice, traced (a grid this small is traced whole), the largest per choice."""
    assert main(["sweep", tiny, *AXES, "--csv", "--quiet"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["batch_size"], r["seq_len"], r["checkpointing"]) for r in rows] == [
        (b, s, c) for c in ("none", "full") for b in ("1", "2") for s in ("16", "32")
    ]
    assert {r["answer"] for r in rows} == {"traced"} and {r["fits"] for r in rows} == {"true"}
    assert main(["sweep", tiny, *AXES, "--json", "--quiet"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [str(p["peak_bytes"]) for p in found["points"]] == [r["peak_bytes"] for r in rows]
    assert main(["sweep", tiny, *AXES, "--quiet"]) == 0
    table = capsys.readouterr().out
    assert "ckpt" in table and "Largest fitting (checkpointing=full): batch 2 x seq 32" in table


def test_a_bad_range_is_one_line(tiny: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", tiny, "--seq-len", "512:128"]) == 2
    assert capsys.readouterr().err == "vramsim: error: --seq-len '512:128': the range ends (128) before it starts (512)\n"
