"""``vramsim inspect`` on a custom module from the user's own file: the tree, --json, --graph; bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from cli_runs import run

MODEL = """
import torch

def build():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

def batch(batch_size, seq_len):
    return {"input": torch.randn(batch_size, 8)}

def loss(output):
    return output.sum()
"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path / "model.py"


def _args(model_file: Path, *more: str) -> list[str]:
    return [
        "inspect",
        f"{model_file}:build",
        "--inputs",
        f"{model_file}:batch",
        "--loss",
        f"{model_file}:loss",
        "--device",
        "cpu",
        *more,
    ]


def test_json_and_graph(model_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json holds the tree (the Sequential's 8*16+16 + 16*4+4 parameters, its three children) and --graph writes
    a GraphML file networkx reads, said on stderr."""
    code, out, err = run(capsys, *_args(model_file, "--json", "--graph", str(tmp_path / "g.graphml")))
    assert code == 0, err
    tree = json.loads(out)["tree"]
    assert tree["parameters"] == 8 * 16 + 16 + 16 * 4 + 4
    assert [(child["path"], child["kind"], child["parameters"]) for child in tree["children"]] == [
        ("0", "Linear", 144),
        ("1", "GELU", 0),
        ("2", "Linear", 68),
    ]
    assert "graph" not in json.loads(out)
    assert f"wrote the op/storage graph to {tmp_path / 'g.graphml'}" in err
    assert nx.read_graphml(tmp_path / "g.graphml").number_of_nodes() > 0


def test_the_tree_printed(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *_args(model_file))
    assert code == 0, err
    assert "(Sequential)" in out and "saved" in out and "Largest temporaries" in out and "At the peak" in out


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--depth", "-1"], "argument --depth: '-1' is not a depth"),
        (["--depth", "two"], "argument --depth: 'two' is not a depth"),
        (["--graph", "out.gexf"], "cannot write a graph to 'out.gexf': name a file ending in .graphml or .dot"),
    ],
)
def test_bad_input_is_one_line(model_file: Path, more: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run(capsys, *_args(model_file, *more))
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and err.count("\n") == 1, err
