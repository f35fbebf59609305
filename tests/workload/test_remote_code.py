"""A local folder with its own model code (config.json's auto_map): run with trust_remote_code, named without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vramsim
from vramsim.cli import main

CONFIGURATION = """
from transformers import PretrainedConfig


class TinyConfig(PretrainedConfig):
    model_type = "vramsim-tiny-custom"

    def __init__(self, vocab_size=32, hidden_size=8, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        super().__init__(**kwargs)
"""

MODELING = """
import torch
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from .configuration_tiny import TinyConfig


class TinyForCausalLM(PreTrainedModel):
    config_class = TinyConfig

    def __init__(self, config):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.head = torch.nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, input_ids, labels=None, **kwargs):
        logits = self.head(self.embed(input_ids))
        loss = None if labels is None else torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return CausalLMOutput(loss=loss, logits=logits)
"""


@pytest.fixture
def custom_folder(tmp_path: Path) -> Path:
    """A causal LM whose auto_map offers AutoModelForCausalLM and no AutoModel."""
    (tmp_path / "configuration_tiny.py").write_text(CONFIGURATION)
    (tmp_path / "modeling_tiny.py").write_text(MODELING)
    config = {
        "model_type": "vramsim-tiny-custom",
        "architectures": ["TinyForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_tiny.TinyConfig", "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_trusted_code_builds_the_class_auto_map_offers(custom_folder: Path) -> None:
    """The task's class (AutoModelForCausalLM) comes from auto_map, not AutoModel, which it lacks."""
    report = vramsim.simulate(custom_folder, trust_remote_code=True, seq_len=8, device="cpu")
    assert report.parameters == 32 * 8 + 8 * 32 + 32
    assert [row.module for row in report.layers] == ["embed", "head"]


def test_untrusted_code_names_the_flag(custom_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the flag: one line saying the folder has its own code and which flag runs it."""
    assert main(["trace", str(custom_folder), "--seq-len", "8"]) == 1
    err = capsys.readouterr().err
    assert (
        err == f"vramsim: error: {custom_folder} has its own model code (config.json's auto_map); --trust-remote-code runs it\n"
    )


def _hub_cache(cache: Path, repo: str, config: dict[str, object]) -> None:
    """``repo`` as huggingface_hub caches a download of its config.json (the Hub cannot be reached here)."""
    commit = "0" * 40
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))


def test_a_hub_id_with_its_own_code_names_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Hub id (offline: its cached config.json) whose config is its own code gets the folder's line, not
    transformers' paragraph ("The repository ... contains custom code ... trust_remote_code=True"); a Hub id
    of a class transformers knows still loads from the cache."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    custom = {
        "model_type": "vramsim-tiny-custom",
        "auto_map": {"AutoConfig": "configuration_tiny.TinyConfig", "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"},
    }
    _hub_cache(tmp_path, "someone/tiny-custom", custom)
    assert main(["trace", "someone/tiny-custom", "--seq-len", "8"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "vramsim: error: 'someone/tiny-custom' has its own model code (config.json's auto_map); --trust-remote-code runs it\n"
    )
    known = {"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 32, "n_positions": 16}
    known |= {"bos_token_id": 0, "eos_token_id": 0}
    _hub_cache(tmp_path, "someone/tiny-gpt2", {**known, "auto_map": {"AutoModelForCausalLM": "modeling.Custom"}})
    report = vramsim.simulate("someone/tiny-gpt2", seq_len=8, device="cpu")
    embeddings, norms, attention, mlp = 32 * 8 + 16 * 8, 3 * 2 * 8, 8 * 24 + 24 + 8 * 8 + 8, 8 * 32 + 32 + 32 * 8 + 8
    assert report.parameters == embeddings + norms + attention + mlp
