"""How long a trace takes beside the model's own Python run untraced on meta, and beside PyTorch's MemTracker.

Each case is measured four ways, each in a process of its own, so that each peak RSS is its own:

- untraced: the workload built on meta as ``vramsim.simulate`` builds it (the target's kernel emulation on), and
  its steps run with no tracer: the floor of any trace. A meta tensor has no values, so the program runs under a
  dispatch mode that only answers what it reads of them (the tracer's ``DataDependentPolicy``, without which a
  Llama does not run on meta at all).
- untraced-native: the same, under ATen's C++ meta kernels where torch puts Python ones over them
  (``tracer/native_meta.py``), as vramsim's tracer runs: the floor of vramsim's own trace.
- traced: the same build, and the same steps run under vramsim's tracer (``trace_program``).
- simulate: ``vramsim.simulate(...)`` end to end (build, trace, graph, the report and its graph advice).
- MemTracker: ``torch.distributed._tools.mem_tracker.MemTracker`` under ``FakeTensorMode`` around the same
  steps of the same workload code, the model built on the CPU inside the fake mode (as ``benchmarks/accuracy.py``
  runs it, every step tracked).

Step figures leave the build out (it is the same in every way but MemTracker's); ``simulate`` is compared with
build + untraced steps. CPU time (``resource.getrusage``, user + system) is beside wall time: on a shared machine
wall time is noisy and the CPU ratio is the figure to read. The README's first command is also run end to end
(``vramsim trace``, advice included) as the user runs it.

Run: ``python benchmarks/speed.py`` (all cases; ``--only 8b-train,readme`` picks some, ``--ways untraced,traced``
leaves out the slower ways; the untraced run is always made, as every ratio's base); prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WAYS = ("untraced", "untraced-native", "traced", "simulate", "memtracker")
README_COMMAND = ["trace", "meta-llama/Llama-3.1-8B", "--task", "train", "--batch-size", "1", "--seq-len", "2048"]


@dataclass(frozen=True)
class Case:
    id: str
    model: str
    options: dict[str, Any]


CASES = [
    Case("8b-train", "meta-llama/Llama-3.1-8B", {"task": "train", "batch_size": 1, "seq_len": 4096}),
    Case("70b-train", "meta-llama/Llama-3.1-70B", {"task": "train", "batch_size": 1, "seq_len": 4096}),
    Case("405b-train", "meta-llama/Llama-3.1-405B", {"task": "train", "batch_size": 1, "seq_len": 4096}),
    Case("8b-generate", "meta-llama/Llama-3.1-8B", {"task": "generate", "batch_size": 1, "seq_len": 4096}),
]
CHOICES = [case.id for case in CASES] + ["readme"]


# -- one measurement, in its own process ------------------------------------------------------------


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _timed(into: dict[str, float], name: str) -> Iterator[None]:
    wall, cpu = time.perf_counter(), _cpu_seconds()
    yield
    into[f"{name}_wall"] = time.perf_counter() - wall
    into[f"{name}_cpu"] = _cpu_seconds() - cpu


class _Observer:
    """What the workload tells an untraced run: only the phase and step, which the value policy reads."""

    def __init__(self, scope: Any) -> None:
        self._scope = scope

    def begin_step(self, step: int) -> None:
        self._scope.step = step

    def end_step(self) -> None:
        pass

    def set_phase(self, phase: Any) -> None:
        self._scope.phase = phase

    def mark(self, tensors: Any, category: Any) -> None:
        pass

    def mark_owned(self, owned: Any, category: Any) -> None:
        pass

    def begin_unit(self, module: str, tensors: Any, positional: Any = ()) -> None:
        pass

    def end_unit(self) -> None:
        pass


def _untraced_mode(scope: Any) -> Any:
    """A dispatch mode that runs each op and answers value reads as the tracer does, and records nothing."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from vramsim.tracer.data_dependent import DataDependentPolicy

    scalar_read = torch.ops.aten._local_scalar_dense.default

    class Untraced(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.policy = DataDependentPolicy(scope, [])

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if func is scalar_read and args[0].device.type == "meta":
                return self.policy.scalar(args[0])
            return self.policy.run(func, args, kwargs or {})

    return Untraced()


def _meta_steps(case: Case, traced: bool, native: bool = False) -> dict[str, float]:
    """Build as ``build_and_trace`` does, then run the steps untraced (under the C++ meta kernels with ``native``)
    or traced."""
    import contextlib
    from types import SimpleNamespace

    from vramsim.config import SimulationConfig
    from vramsim.tracer.categories import Phase
    from vramsim.tracer.native_meta import native_meta_kernels
    from vramsim.workload.attention import attention_stand_in
    from vramsim.workload.build import build_program
    from vramsim.workload.program import run_program
    from vramsim.workload.quantization.weights import quantized_kernels_on_meta
    from vramsim.workload.targets import resolve_target
    from vramsim.workload.tracing import trace_program

    config = SimulationConfig.from_options(**case.options)
    target = resolve_target(config.device)
    figures: dict[str, float] = {}
    with (
        target.emulation(config.torch_autograd) as emulation,
        attention_stand_in(config.attn_implementation, emulation),
        quantized_kernels_on_meta(config.quantization, config.device),
    ):
        with _timed(figures, "build"):
            program = build_program(
                case.model, config, device="meta", emulation=emulation, foreach=target.foreach, checkpointing="marked"
            )
        with _timed(figures, "steps"):
            if traced:
                trace = trace_program(
                    program, devices=target.counted_devices, workspaces=target.rules.workspaces, moe_routing=config.moe_routing
                )
                figures["ops"] = len(trace.ops)
            else:
                scope = SimpleNamespace(module="", phase=Phase.SETUP, step=-1)
                with native_meta_kernels() if native else contextlib.nullcontext(), _untraced_mode(scope):
                    run_program(program, _Observer(scope))
    return figures


def _simulate(case: Case) -> dict[str, float]:
    from vramsim.api import simulate  # imported before the clock starts, as the untraced run's modules are

    figures: dict[str, float] = {}
    with _timed(figures, "total"):
        simulate(case.model, cache=False, **case.options)  # traced, not an earlier run's cached answer
    return figures


def _memtracker(case: Case) -> dict[str, float]:
    """MemTracker around every step, under FakeTensorMode; generate calls the model once per token, and
    MemTracker refuses a module seen twice unless its module stats are reset (a global pre-hook, run first)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from vramsim.config import SimulationConfig
    from vramsim.workload.build import build_program
    from vramsim.workload.program import run_program

    config = SimulationConfig.from_options(**{**case.options, "device": "cpu"})
    figures: dict[str, float] = {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        with _timed(figures, "build"):
            program = build_program(case.model, config, device="cpu")
        tracker = MemTracker()
        external: list[Any] = [program.model, *(t for t in program.batch.values() if isinstance(t, torch.Tensor))]
        if program.optimizer is not None:
            external.append(program.optimizer)
        tracker.track_external(*external)

        def reset(module: torch.nn.Module, args: Any) -> None:
            if module is program.model:
                tracker.reset_mod_stats()

        hook = torch.nn.modules.module.register_module_forward_pre_hook(reset)
        try:
            with _timed(figures, "steps"), tracker:
                run_program(program, _Observer(type("Scope", (), {})()))
        finally:
            hook.remove()
    figures["peak"] = sum(int(snapshot["Total"]) for snapshot in tracker.get_tracker_snapshot("peak").values())
    return figures


def _readme() -> dict[str, float]:
    """The README's command as the user runs it the first time (``--no-cache``: traced, not answered from an
    earlier run's cached result), with its own RSS (the child's)."""
    figures: dict[str, float] = {}
    command = [sys.executable, "-c", "import sys; from vramsim.cli import main; sys.exit(main())", *README_COMMAND, "--no-cache"]
    with _timed(figures, "total"):
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    figures["total_cpu"] = _children_cpu()
    figures["rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return figures


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(case_id: str, way: str) -> dict[str, float]:
    """One measurement in this process; its peak RSS is this process's."""
    if case_id == "readme":
        return _readme()
    case = next(c for c in CASES if c.id == case_id)
    runs: dict[str, Callable[[], dict[str, float]]] = {
        "untraced": lambda: _meta_steps(case, traced=False),
        "untraced-native": lambda: _meta_steps(case, traced=False, native=True),
        "traced": lambda: _meta_steps(case, traced=True),
        "simulate": lambda: _simulate(case),
        "memtracker": lambda: _memtracker(case),
    }
    figures = runs[way]()
    figures["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


# -- the driver ---------------------------------------------------------------------------------------


def _in_subprocess(case_id: str, way: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", case_id, way], capture_output=True, text=True
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        return {"error": lines[-1][:100]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(case_id: str, label: str, figures: dict[str, Any], key: str, base: dict[str, Any] | None, base_keys: list[str]) -> str:
    if "error" in figures:
        return f"| {case_id} | {label} | cannot run: {figures['error'].replace('|', '/')} | | | | |"
    wall, cpu = figures[f"{key}_wall"], figures[f"{key}_cpu"]
    if base is None or "error" in base:
        wall_ratio = cpu_ratio = ""
    else:
        wall_ratio = f"{wall / sum(base[f'{k}_wall'] for k in base_keys):.2f}x"
        cpu_ratio = f"{cpu / sum(base[f'{k}_cpu'] for k in base_keys):.2f}x"
    return f"| {case_id} | {label} | {wall:.1f} | {wall_ratio} | {cpu:.1f} | {cpu_ratio} | {figures['rss_mib']:,.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(CHOICES), help=f"comma-separated cases: {', '.join(CHOICES)}")
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated ways to run each case: {', '.join(WAYS)}")
    parser.add_argument("--measure", nargs=2, metavar=("CASE", "WAY"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        print(json.dumps(measure(*options.measure)))
        return
    chosen = options.only.split(",")
    unknown = sorted(set(chosen) - set(CHOICES))
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; choose from: {', '.join(CHOICES)}")
    print("| case | run | wall (s) | wall / untraced | CPU (s) | CPU / untraced | peak RSS (MiB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for case_id in [c for c in CHOICES if c in chosen]:
        print(f"  {case_id}...", file=sys.stderr, flush=True)
        if case_id == "readme":
            print(_row(case_id, "`vramsim " + " ".join(README_COMMAND) + "`", _in_subprocess(case_id, "cli"), "total", None, []))
            continue
        ways = ["untraced", *(w for w in WAYS[1:] if w in options.ways.split(","))]
        got = {way: _in_subprocess(case_id, way) for way in ways}
        untraced = got["untraced"]
        print(_row(case_id, "untraced meta: the steps", untraced, "steps", None, []))
        if "untraced-native" in got:
            label = "untraced meta, C++ meta kernels: the steps"
            print(_row(case_id, label, got["untraced-native"], "steps", untraced, ["steps"]))
        if "traced" in got:
            print(_row(case_id, "vramsim's trace of the steps", got["traced"], "steps", untraced, ["steps"]))
        print(_both(case_id, untraced))
        if "simulate" in got:
            print(_row(case_id, "`vramsim.simulate` end to end", got["simulate"], "total", untraced, ["build", "steps"]))
        if "memtracker" in got:
            print(_row(case_id, "MemTracker (FakeTensorMode): the steps", got["memtracker"], "steps", untraced, ["steps"]))
        sys.stdout.flush()


def _both(case_id: str, untraced: dict[str, Any]) -> str:
    """The untraced run's build and steps together: what ``simulate`` is compared with."""
    if "error" in untraced:
        return _row(case_id, "untraced meta: build + steps", untraced, "", None, [])
    total = {
        "total_wall": untraced["build_wall"] + untraced["steps_wall"],
        "total_cpu": untraced["build_cpu"] + untraced["steps_cpu"],
        "rss_mib": untraced["rss_mib"],
    }
    return _row(case_id, "untraced meta: build + steps", total, "total", None, [])


if __name__ == "__main__":
    main()
