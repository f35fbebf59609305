"""A request's key changes with anything its answer depends on, and only with that."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
import torch
import transformers

from vramsim.cache import request_key

BASE = {"task": "train", "seq_len": 16, "device": "h100"}


def _key(model: object = "gpt2", options: dict[str, object] | None = None, **parts: object) -> str | None:
    return request_key("simulate", model, {**BASE, **(options or {})}, **parts)


def test_defaults_fold_into_one_key() -> None:
    """An option left out and the same option at its default are one request; named aliases too."""
    assert _key() == _key(options={"batch_size": 1, "optimizer": "adamw", "checkpointing": "none"})
    assert _key() is not None and len(_key() or "") == 64


@pytest.mark.parametrize(
    "change",
    [
        {"batch_size": 2},
        {"seq_len": 32},
        {"device": "a100-80gb"},
        {"dtype": "fp32"},
        {"mixed_precision": "bf16", "dtype": "fp32"},
        {"optimizer": "sgd"},
        {"checkpointing": "full"},
        {"gpus": 2, "zero": 3},
        {"lora": 8},
        {"headroom": 0.2},
        {"task": "forward"},
        {"attn_implementation": "eager"},
        {"expandable_segments": True},
    ],
)
def test_every_option_changes_the_key(change: dict[str, object]) -> None:
    assert _key(options=change) != _key()


def test_the_request_parts_change_the_key(tmp_path: Path) -> None:
    """Variants, advice and a caller's own parts (a file by its content) are part of the request."""
    assert _key(variants=[{}], advice="graph") != _key(variants=[{"checkpointing": "full"}], advice="graph")
    assert _key(variants=[{}], advice="graph") != _key(variants=[{}], advice="traced")
    sheet = tmp_path / "prices.toml"
    sheet.write_text("h100 = 2.0\n")
    before = _key(sheet=sheet)
    assert before == _key(sheet=sheet)
    sheet.write_text("h100 = 2.5\n")
    assert _key(sheet=sheet) != before
    assert request_key("plan", "gpt2", BASE) != request_key("simulate", "gpt2", BASE)


def test_the_model_is_keyed_by_its_content(tmp_path: Path, tiny_gpt2: transformers.GPT2Config) -> None:
    """The same folder with another config.json is another request; a config object by its fields."""
    tiny_gpt2.save_pretrained(tmp_path)
    before = _key(str(tmp_path))
    tiny_gpt2.n_layer = 3
    tiny_gpt2.save_pretrained(tmp_path)
    assert _key(str(tmp_path)) != before
    assert _key(tiny_gpt2) == _key(transformers.GPT2Config.from_dict(tiny_gpt2.to_dict()))
    assert _key(tiny_gpt2) != _key(transformers.GPT2Config(n_layer=4, n_embd=32, n_head=2, vocab_size=300))
    assert _key("gpt2") != _key("openai-community/gpt2")  # one config, but the report names the model as given


def test_user_files_are_keyed_by_their_content(tmp_path: Path) -> None:
    """``--inputs file.py:fn`` and ``--loss file.py:fn`` reach ``simulate`` as the functions loaded from the file."""
    from vramsim.workload.models import load_function

    script = tmp_path / "batch.py"
    script.write_text("import torch\ndef inputs(b, s):\n    return {'input_ids': torch.zeros(b, s, dtype=torch.long)}\n")
    before = _key(options={"inputs": load_function(f"{script}:inputs", "")})
    assert before is not None and before == _key(options={"inputs": load_function(f"{script}:inputs", "")})
    script.write_text(script.read_text().replace("torch.zeros(b, s", "torch.zeros(b, 2 * s"))
    assert _key(options={"inputs": load_function(f"{script}:inputs", "")}) != before


def test_what_cannot_be_written_out_is_not_keyed(tiny_gpt2: transformers.GPT2Config) -> None:
    """A model object, a lambda and the model's own remote code: no key, so those requests are traced."""
    assert _key(transformers.GPT2LMHeadModel(tiny_gpt2)) is None
    assert _key(options={"inputs": lambda b, s: {"input_ids": torch.zeros(b, s, dtype=torch.long)}}) is None
    assert _key(options={"trust_remote_code": True}) is None
    assert _key(options={"optimizer": torch.optim.SGD}) is not None  # a library's class, by its name


@pytest.mark.parametrize("library", ["vramsim", "torch", "transformers", "diffusers"])
def test_a_library_version_changes_the_key(library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _key()
    installed = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.1" if name == library else installed(name))
    assert _key() != before
