"""The public surface is small, sorted and pinned."""

import vramsim


def test_all_is_sorted_and_pinned() -> None:
    assert vramsim.__all__ == sorted(vramsim.__all__)
    assert set(vramsim.__all__) == {
        "Assumption", "ConfigError", "LayerRow", "ModelNotFoundError", "PeakSite", "Report", "TraceError",
        "UnsupportedError", "Validation", "VramsimError", "count_parameters", "simulate", "validate",
    }  # fmt: skip
