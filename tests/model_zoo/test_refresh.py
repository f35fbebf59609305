"""The refresh script compares each bundled file with the published one and writes the published contents when
asked; the Hub is replaced by a fetch that serves files from a folder (no test reaches the network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vramsim import model_zoo
from vramsim.model_zoo import refresh

SMALL = "openai-community/gpt2"
PIPELINE = "stable-diffusion-v1-5/stable-diffusion-v1-5"


def _published(tmp_path: Path, model_id: str, edits: dict[str, dict[str, object]]) -> refresh.Fetch:
    """A fetch serving a copy of the bundled folder with ``edits`` applied to the files they name."""
    folder = model_zoo.find_pipeline(model_id) or model_zoo.find(model_id)
    assert folder is not None
    hub = tmp_path / "hub"
    shutil.copytree(folder, hub)
    for name, changes in edits.items():
        data = json.loads((hub / name).read_text())
        data.update(changes)
        (hub / name).write_text(json.dumps(data))
    return lambda repo_id, filename: str(hub / filename)


def test_a_file_as_published_has_no_differences(tmp_path: Path) -> None:
    report = refresh.refresh(SMALL, _published(tmp_path, SMALL, {}))
    assert report == {"config.json": []}


def test_a_changed_and_an_added_key_are_each_reported(tmp_path: Path) -> None:
    fetch = _published(tmp_path, SMALL, {"config.json": {"n_layer": 24, "new_flag": True}})
    assert refresh.refresh(SMALL, fetch) == {"config.json": ["n_layer: 12 -> 24", "new_flag: (absent) -> True"]}


def test_a_pipeline_compares_its_index_and_components_and_only_the_kept_tokenizer_keys(tmp_path: Path) -> None:
    fetch = _published(
        tmp_path,
        PIPELINE,
        {"tokenizer/tokenizer_config.json": {"unk_token": "<|endoftext|>"}, "unet/config.json": {"sample_size": 96}},
    )
    report = refresh.refresh(PIPELINE, fetch)
    assert "model_index.json" in report and "vae/config.json" in report
    assert report["tokenizer/tokenizer_config.json"] == []  # a key the zoo does not keep is no difference
    assert report["unet/config.json"] == ["sample_size: 64 -> 96"]


def test_nested_values_are_dotted(tmp_path: Path) -> None:
    assert refresh.differences({"a": {"b": 1, "c": [1]}}, {"a": {"b": 2, "c": [1]}}) == ["a.b: 1 -> 2"]


def test_write_replaces_the_bundled_file_with_the_published_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = model_zoo.find(SMALL)
    assert original is not None
    copy = tmp_path / "zoo"
    shutil.copytree(original, copy)
    monkeypatch.setattr(refresh, "find", lambda model_id: copy)
    fetch = _published(tmp_path, SMALL, {"config.json": {"n_layer": 24}})
    refresh.refresh(SMALL, fetch, write=True)
    assert json.loads((copy / "config.json").read_text())["n_layer"] == 24
    assert refresh.refresh(SMALL, fetch) == {"config.json": []}


def test_an_id_the_hub_does_not_answer_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    def unreachable(repo_id: str, filename: str) -> str:
        raise OSError("We couldn't connect to 'https://huggingface.co'\nmore detail")

    assert refresh.main([SMALL], fetch=unreachable) == 1
    assert capsys.readouterr().out == f"{SMALL}: not refreshed: OSError: We couldn't connect to 'https://huggingface.co'\n"


def test_an_id_not_bundled_is_refused() -> None:
    with pytest.raises(ValueError, match="no-such/model is not bundled"):
        refresh.bundled_files("no-such/model")


def test_an_alias_is_fetched_from_the_repository_bundled(tmp_path: Path) -> None:
    asked: list[str] = []
    served = _published(tmp_path, SMALL, {})

    def fetch(repo_id: str, filename: str) -> str:
        asked.append(repo_id)
        return served(repo_id, filename)

    refresh.refresh("gpt2", fetch)
    assert asked == [SMALL]
