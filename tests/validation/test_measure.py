"""The CPU ground truth's reading of the profiler: only the measured run's own bytes count."""

from __future__ import annotations

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from vramsim.validation.measure import _STEP_MARK, _last_step_peak


def test_a_tensor_an_earlier_profiled_run_left_does_not_lower_the_peak_when_freed() -> None:
    """c10's reporter knows the size of a tensor allocated under an earlier profile and reports its free
    in a later one: that free is not the measured run's and must not lower its running total."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        cached = torch.ones(4096)  # 16,384 B, as a cache an earlier test filled
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, record_function(f"{_STEP_MARK}0"):
        first = torch.ones(1024)  # 4,096 B
        del cached
        second = torch.ones(2048)  # 8,192 B
        del first, second
    assert _last_step_peak(prof, 0).peak_bytes == 4096 + 8192
