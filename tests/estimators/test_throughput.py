"""The GPUs' dense peaks: catalog names, a source per row, and dense figures (half the datasheets' sparse ones)."""

from __future__ import annotations

import re

from vramsim.estimators.devices import DEVICES
from vramsim.estimators.throughput import PEAK_TFLOPS

_SPARSE = re.compile(r"(?:BF16/FP16|FP16/BF16|tensor) ([\d,.]+)( PFLOPS)? with sparsity")


def test_every_row_is_a_catalog_gpu_with_its_source() -> None:
    assert set(PEAK_TFLOPS) <= set(DEVICES)
    for name, peak in PEAK_TFLOPS.items():
        assert peak.source and peak.float32 > 0 and (peak.float16 or 0) > peak.float32, name
        no_bf16 = DEVICES[name].architecture in ("volta", "turing")
        assert (peak.bfloat16 is None) == no_bf16 and (no_bf16 or peak.bfloat16 == peak.float16), name


def test_the_figures_are_dense_not_sparse() -> None:
    """Where the row cites the datasheet's sparse figure, the dense one kept is its half (to the datasheet's rounding)."""
    checked = 0
    for name, peak in PEAK_TFLOPS.items():
        match = _SPARSE.search(peak.source)
        if match:
            sparse = float(match[1].replace(",", "")) * (1000 if match[2] else 1)
            assert abs(peak.float16 - sparse / 2) <= 0.5, name  # type: ignore[operator]
            checked += 1
    assert checked >= 20
    assert PEAK_TFLOPS["h100-sxm"].bfloat16 == 989.5 and PEAK_TFLOPS["a100-80gb"].bfloat16 == 312
