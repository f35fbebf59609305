"""vramsim against the real CPU run, next to PyTorch's own MemTracker, on the ground-truth cases.

For every case of ``tests/ground_truth/ground_truth_cases.py``:

- measured: ``vramsim.validation.measure.measure_cpu``, the workload run for real on the CPU (peak of
  c10's allocated bytes in the last step);
- vramsim: ``vramsim.simulate(..., device="cpu")``;
- MemTracker: ``torch.distributed._tools.mem_tracker.MemTracker`` under ``FakeTensorMode``
  on the same workload code (``vramsim/workload/program.py``), the model built on the CPU inside the
  fake mode. Step 0 runs untracked; before the last step the tracker is told about the model,
  the optimizer and the batch (``track_external``) and entered, so its ``"peak"`` snapshot,
  summed over devices, is the last step's peak. A case it cannot run shows the reason.

Run: ``python benchmarks/accuracy.py`` (about a minute on two cores); prints a Markdown table.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ground_truth"))

from ground_truth_cases import CASES, Case

from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.validation.measure import RealRun, measure_cpu
from vramsim.workload.build import build_program
from vramsim.workload.program import Program, run_program


class _MemTrackerObserver(RealRun):
    """Enters a MemTracker around the last step of the workload."""

    def __init__(self, program: Program) -> None:
        from torch.distributed._tools.mem_tracker import MemTracker

        self.program = program
        self.tracker = MemTracker()
        self.peak: int | None = None
        self._reset_hook: Any = None

    def begin_step(self, step: int) -> None:
        if step != self.program.steps - 1:
            return
        external: list[Any] = [self.program.model]
        if self.program.optimizer is not None:
            external.append(self.program.optimizer)
        external.extend(t for t in self.program.batch.values() if isinstance(t, torch.Tensor))
        self.tracker.track_external(*external)
        # generate calls the model once per token; MemTracker refuses a module seen twice unless
        # its module stats are reset. A global hook registered before the tracker's runs first.
        self._reset_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._reset_between_calls)
        self.tracker.__enter__()

    def _reset_between_calls(self, module: torch.nn.Module, args: Any) -> None:
        if module is self.program.model:
            self.tracker.reset_mod_stats()

    def close(self) -> None:
        while self.tracker._depth:
            self.tracker.__exit__(None, None, None)
        if self._reset_hook is not None:
            self._reset_hook.remove()
            self._reset_hook = None

    def end_step(self) -> None:
        if self.tracker._depth:  # the last step ran under the tracker
            self.close()
            peak = self.tracker.get_tracker_snapshot("peak")
            self.peak = sum(int(snapshot["Total"]) for snapshot in peak.values())


def memtracker_peak(case: Case) -> int:
    from torch._subclasses.fake_tensor import FakeTensorMode

    config = SimulationConfig(device="cpu", **case.options)
    torch.manual_seed(0)
    with FakeTensorMode(allow_non_fake_inputs=True):
        program = build_program(case.source(), config, device="cpu")
        observer = _MemTrackerObserver(program)
        try:
            run_program(program, observer)
        finally:
            observer.close()  # a failed run must not leave the tracker's global hooks behind
    if observer.peak is None:
        raise RuntimeError("the tracker saw no last step")
    return observer.peak


def _error(predicted: int, measured: int) -> float:
    return 100 * (predicted / measured - 1)


def main() -> None:
    rows = []
    vramsim_errors: list[float] = []
    tracker_errors: list[float] = []
    started = time.perf_counter()
    for case in CASES:
        measured = measure_cpu(case.source(), SimulationConfig(device="cpu", **case.options)).peak_bytes
        predicted = simulate(case.source(), device="cpu", **case.options).peak_bytes
        error = _error(predicted, measured)
        vramsim_errors.append(abs(error))
        try:
            tracked = memtracker_peak(case)
        except Exception as exc:
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:90].replace("|", "/")
            tracker_cells = ["cannot run", reason]
        else:
            tracker_error = _error(tracked, measured)
            tracker_errors.append(abs(tracker_error))
            tracker_cells = [f"{tracked:,}", f"{tracker_error:+.2f}%"]
        rows.append([case.id, f"{predicted:,}", f"{measured:,}", f"{error:+.3f}%", *tracker_cells])
        print(f"  {case.id}: done", file=sys.stderr, flush=True)
    header = ["case", "vramsim predicted (B)", "measured (B)", "vramsim error", "MemTracker (B)", "MemTracker error"]
    print("| " + " | ".join(header) + " |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print(f"Median absolute error, vramsim: {statistics.median(vramsim_errors):.3f}% over {len(vramsim_errors)} cases")
    if tracker_errors:
        print(
            f"Median absolute error, MemTracker: {statistics.median(tracker_errors):.3f}% over the "
            f"{len(tracker_errors)} cases it could run ({len(CASES) - len(tracker_errors)} could not)"
        )
    print(f"Wall time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
