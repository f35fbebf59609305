"""Every bundled config must build, on the meta device, exactly the parameter count its publisher reports.

A wrong hidden size, head_dim, vocabulary or tie flag in a zoo config.json would silently skew every memory
prediction vramsim makes for that model; an exact integer match against the published figure catches it.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig

from vramsim import model_zoo
from vramsim.model_zoo.published import PUBLISHED, Published, rounded
from vramsim.workload.models import build_model


def _counts(model: torch.nn.Module) -> tuple[int, int]:
    """(parameters, stored non-parameter tensors): parameters() dedups tied weights; state_dict adds buffers."""
    params = sum(p.numel() for p in model.parameters())
    names = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    buffers = sum(t.numel() for name, t in model.state_dict().items() if name not in names)
    return params, buffers


@pytest.mark.parametrize("case", PUBLISHED, ids=[case.model_id for case in PUBLISHED])
def test_bundled_config_builds_the_published_parameter_count(case: Published) -> None:
    folder = model_zoo.find(case.model_id)
    assert folder is not None, f"{case.model_id} is not bundled"
    model = build_model(AutoConfig.from_pretrained(folder), device="meta", dtype=None, model_class=case.auto_class)
    assert type(model).__name__ == case.model_class
    params, buffers = _counts(model)
    assert buffers == case.buffers
    if isinstance(case.count, int):
        assert params + buffers == case.count
    else:
        assert rounded(params + buffers, case.count) == case.count


@pytest.mark.parametrize(
    ("count", "published", "written"),
    [
        (596_049_920, "0.6B", "0.6B"),
        (1_720_574_976, "1.7B", "1.7B"),
        (671_026_419_200, "671B", "671B"),
        (14_768_307_200, "14.8B", "14.8B"),
        (7_241_732_096, "7.3B", "7.2B"),
    ],
)
def test_rounded_writes_the_figure_as_published(count: int, published: str, written: str) -> None:
    assert rounded(count, published) == written


def test_model_ids_lists_every_bundled_model() -> None:
    ids = model_zoo.model_ids()
    assert ids == sorted(case.model_id for case in PUBLISHED)


@pytest.mark.parametrize(
    ("alias", "model_id"),
    [
        ("gpt2", "openai-community/gpt2"),
        ("bert-base-uncased", "google-bert/bert-base-uncased"),
        ("bert-large-uncased", "google-bert/bert-large-uncased"),
        ("t5-small", "google-t5/t5-small"),
        ("t5-base", "google-t5/t5-base"),
        ("t5-large", "google-t5/t5-large"),
        ("gpt2-medium", "openai-community/gpt2-medium"),
        ("gpt2-large", "openai-community/gpt2-large"),
        ("gpt2-xl", "openai-community/gpt2-xl"),
        ("roberta-base", "FacebookAI/roberta-base"),
    ],
)
def test_find_resolves_legacy_short_ids(alias: str, model_id: str) -> None:
    folder = model_zoo.find(alias)
    assert folder is not None
    assert folder == model_zoo.find(model_id)
    assert (folder / "config.json").is_file()


@pytest.mark.parametrize(
    "model_id",
    [
        "no-such-org/no-such-model",
        "META-LLAMA/Llama-3.1-8B",  # Hub ids are case-sensitive, whatever the filesystem is
        "meta-llama",
        "meta-llama/Llama-3.1-8B/config.json",
        "../configs/meta-llama/Llama-3.1-8B",
        "",
    ],
)
def test_find_returns_none_for_ids_not_bundled(model_id: str) -> None:
    assert model_zoo.find(model_id) is None
