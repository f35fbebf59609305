"""The public surface is small, sorted and pinned."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import vramsim
from vramsim import api, errors


def test_all_is_sorted_and_pinned() -> None:
    assert vramsim.__all__ == sorted(vramsim.__all__)
    assert set(vramsim.__all__) == {
        "Advice",
        "Assumption",
        "CheckpointReport",
        "Comparison",
        "ConfigError",
        "Inspection",
        "LargestFit",
        "LayerRow",
        "ModelNotFoundError",
        "PeakSite",
        "Plan",
        "Report",
        "ServeComparison",
        "ServeReport",
        "StrategySearch",
        "Sweep",
        "TraceError",
        "UnsupportedError",
        "Validation",
        "VramsimError",
        "advice_line",
        "cheapest_strategy",
        "checkpoint",
        "compare",
        "compare_serve",
        "compare_text",
        "count_parameters",
        "format_bytes",
        "inspect",
        "largest_fit",
        "plan",
        "report_html",
        "report_text",
        "serve",
        "simulate",
        "simulate_each",
        "sweep",
        "validate",
        "write_chrome_trace",
        "write_memory_viz",
        "write_graph",
    }


def test_examples_use_only_public_names() -> None:
    """An example imports ``vramsim`` and its public names, never a module inside it."""
    for script in sorted((Path(__file__).parents[1] / "examples").glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vramsim"):
                assert node.module == "vramsim" and {a.name for a in node.names} <= set(vramsim.__all__), script.name
            if isinstance(node, ast.Import):
                assert all(a.name == "vramsim" or not a.name.startswith("vramsim.") for a in node.names), script.name


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
