"""Every bundled diffusion pipeline's components build, on the meta device, the parameter counts their publishers report.

The figures (model_zoo/published.py ``PIPELINES``, each with its source) are the published ones: the denoisers'
and VAEs' safetensors totals on the Hub, and the text encoders' (CLIP ViT-L/14's text tower, 123,060,480;
OpenCLIP ViT-bigG/14's with its projection, 694,659,840); a figure published only rounded is checked rounded.
"""

from __future__ import annotations

import pytest
import torch

from vramsim import model_zoo
from vramsim.model_zoo.entries import pipeline_entries
from vramsim.model_zoo.published import PIPELINES, rounded
from vramsim.workload.diffusion.spec import find_pipeline


def _build(folder: object, name: str, library: str, class_name: str) -> torch.nn.Module:
    import diffusers
    import transformers

    path = f"{folder}/{name}"
    with torch.device("meta"):
        if library == "transformers":
            config = transformers.AutoConfig.from_pretrained(path)
            return getattr(transformers, class_name)(config)
        cls = getattr(diffusers, class_name)
        return cls.from_config(cls.load_config(path))


@pytest.mark.parametrize("pipeline_id", sorted(PIPELINES))
def test_bundled_pipeline_components_have_the_published_parameter_counts(pipeline_id: str) -> None:
    spec = find_pipeline(pipeline_id)
    assert spec is not None
    counts: dict[str, int | str] = {}
    for name, published in PIPELINES[pipeline_id].items():
        library, class_name = spec.index[name]
        count = sum(p.numel() for p in _build(spec.folder, name, library, class_name).parameters())
        counts[name] = count if isinstance(published, int) else rounded(count, published)
    assert counts == PIPELINES[pipeline_id]


def test_pipeline_ids_are_listed_and_the_old_sd15_id_resolves() -> None:
    assert model_zoo.pipeline_ids() == sorted(PIPELINES)
    assert model_zoo.find_pipeline("runwayml/stable-diffusion-v1-5") == model_zoo.find_pipeline(
        "stable-diffusion-v1-5/stable-diffusion-v1-5"
    )
    assert model_zoo.find("stabilityai/stable-diffusion-xl-base-1.0") is None  # a pipeline is no single model's config


def test_the_listing_shows_each_pipeline_denoisers_published_count() -> None:
    for entry in pipeline_entries():
        spec = find_pipeline(entry.model_id)
        assert spec is not None
        assert entry.parameters == PIPELINES[entry.model_id][spec.denoiser]
