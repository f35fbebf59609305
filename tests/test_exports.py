"""The public surface is small, sorted and pinned."""

import subprocess
import sys

import pytest

import vramsim
from vramsim import api, errors


def test_all_is_sorted_and_pinned() -> None:
    assert vramsim.__all__ == sorted(vramsim.__all__)
    assert set(vramsim.__all__) == {
        "Assumption",
        "CheckpointReport",
        "ConfigError",
        "LargestFit",
        "LayerRow",
        "ModelNotFoundError",
        "PeakSite",
        "Report",
        "StrategySearch",
        "TraceError",
        "UnsupportedError",
        "Validation",
        "VramsimError",
        "cheapest_strategy",
        "checkpoint",
        "count_parameters",
        "largest_fit",
        "simulate",
        "simulate_each",
        "validate",
    }


def test_every_public_name_resolves_to_its_home() -> None:
    """The lazy ``__getattr__`` finds each name in ``__all__``, and refuses others."""
    assert vramsim.simulate is api.simulate and vramsim.TraceError is errors.TraceError
    assert all(getattr(vramsim, name) is not None for name in vramsim.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        vramsim.nope  # noqa: B018


def test_estimators_import_without_torch() -> None:
    """The estimators are arithmetic on records: importing them must not load torch or transformers."""
    code = (
        "import sys, vramsim, vramsim.errors, vramsim.estimators.allocator, vramsim.estimators.assumptions, "
        "vramsim.estimators.checkpointing, vramsim.estimators.devices, vramsim.estimators.kv_cache, "
        "vramsim.estimators.liveness, vramsim.estimators.serving, vramsim.estimators.timeline; "
        "heavy = sorted({'torch', 'transformers'} & set(sys.modules)); assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
