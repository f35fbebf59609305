"""The tiny FLUX pipeline widened to 256 (attention_head_dim 128): its linear rows hold whole Q4_K blocks of 256
and quanto's int4 groups of 128, and the transformer's step sets the peak at 64x64."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

TINY_FLUX = Path(__file__).parents[2] / "ground_truth" / "pipelines" / "tiny-flux"


@pytest.fixture(scope="module")
def wide_flux(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("flux") / "wide-flux"
    shutil.copytree(TINY_FLUX, folder)
    config_file = folder / "transformer" / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps(config | {"attention_head_dim": 128, "axes_dims_rope": [16, 56, 56]}))
    return str(folder)
