"""Predicted vs measured on a real CUDA GPU, for bundled models from 0.1B to 47B parameters.

Two halves, so the GPU is needed only for the measurement:

    python benchmarks/gpu_validation.py measure OUT_DIR   # on a GPU machine (about 5 minutes on an H200)
    python benchmarks/gpu_validation.py compare [FILE]    # anywhere: vramsim's prediction beside each figure

``measure`` runs each case, in a process of its own, with the simulator's own workload code
(``vramsim.workload.program``) on ``cuda:0`` and writes ``gpu_measured.json``: ``max_memory_allocated``
and ``max_memory_reserved`` over the steady-state step, the device memory in use after it
(``cudaMemGetInfo``), and the machine's stack (torch, CUDA, driver, the bare context). It also
writes ``gpu_traces.json.gz``, the allocator's own events from the model's build on
(``torch.cuda.memory._record_memory_history`` without stacks), so a miss can be split into a
different event stream and a different allocator rule by replaying them.
``compare`` reads a measured file (default: the H200 run under ``benchmarks/measured/``) and
prints one Markdown row per case.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

MEASURED = Path(__file__).with_name("measured") / "h200.json"


def _fused_adamw(params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-4, fused=True)


CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama3.2-1b train fp32 weights bf16-autocast": ("meta-llama/Llama-3.2-1B",
        dict(task="train", optimizer="adamw-foreach", batch_size=4, seq_len=2048, dtype="fp32", mixed_precision="bf16")),
    "llama3.2-1b train bf16-autocast ckpt": ("meta-llama/Llama-3.2-1B",
        dict(task="train", optimizer="adamw-foreach", batch_size=4, seq_len=4096, dtype="fp32", mixed_precision="bf16",
             gradient_checkpointing=True)),
    "llama3.2-1b train bf16 fused-adamw": ("meta-llama/Llama-3.2-1B",
        dict(task="train", batch_size=4, seq_len=2048, dtype="bf16", optimizer=_fused_adamw)),
    "llama3.2-1b forward bf16 eager-attention": ("meta-llama/Llama-3.2-1B",
        dict(task="forward", batch_size=2, seq_len=4096, dtype="bf16", attn_implementation="eager")),
    "llama3.2-1b train fp32": ("meta-llama/Llama-3.2-1B",
        dict(task="train", optimizer="adamw-foreach", batch_size=2, seq_len=2048, dtype="fp32")),
    "llama3.2-1b train fp16-autocast gradscaler": ("meta-llama/Llama-3.2-1B",
        dict(task="train", optimizer="adamw-foreach", batch_size=4, seq_len=2048, dtype="fp32", mixed_precision="fp16")),
    "llama3.2-3b train bf16": ("meta-llama/Llama-3.2-3B",
        dict(task="train", optimizer="adamw-foreach", batch_size=2, seq_len=2048, dtype="bf16")),
    "qwen2.5-0.5b forward bf16": ("Qwen/Qwen2.5-0.5B", dict(task="forward", batch_size=8, seq_len=4096, dtype="bf16")),
    "gpt2 train fp32": ("openai-community/gpt2",
        dict(task="train", optimizer="adamw-foreach", batch_size=8, seq_len=1024)),
    "bert-base train fp32": ("google-bert/bert-base-uncased",
        dict(task="train", optimizer="adamw-foreach", batch_size=32, seq_len=512)),
    "t5-base train fp32": ("google-t5/t5-base", dict(task="train", optimizer="adamw-foreach", batch_size=8, seq_len=512)),
    "phi3-mini train bf16 ckpt": ("microsoft/Phi-3-mini-4k-instruct",
        dict(task="train", optimizer="adamw-foreach", batch_size=2, seq_len=4096, dtype="bf16",
             gradient_checkpointing=True)),
    "llama3.1-8b forward bf16": ("meta-llama/Llama-3.1-8B", dict(task="forward", batch_size=1, seq_len=8192, dtype="bf16")),
    "llama3.1-8b generate bf16": ("meta-llama/Llama-3.1-8B",
        dict(task="generate", batch_size=4, seq_len=1024, max_new_tokens=32, dtype="bf16")),
    "llama3.1-8b train bf16 ckpt": ("meta-llama/Llama-3.1-8B",
        dict(task="train", optimizer="adamw-foreach", batch_size=1, seq_len=2048, dtype="bf16",
             gradient_checkpointing=True)),
    "llama3.1-8b lora-r16 bf16": ("meta-llama/Llama-3.1-8B",
        dict(task="train", optimizer="adamw-foreach", batch_size=2, seq_len=2048, dtype="bf16",
             lora=dict(r=16, lora_alpha=32, target_modules="all-linear"))),
    "mistral-7b forward bf16": ("mistralai/Mistral-7B-v0.1", dict(task="forward", batch_size=2, seq_len=4096, dtype="bf16")),
    "gemma2-9b forward bf16": ("google/gemma-2-9b", dict(task="forward", batch_size=1, seq_len=4096, dtype="bf16")),
    "mixtral-8x7b forward bf16": ("mistralai/Mixtral-8x7B-v0.1",
        dict(task="forward", batch_size=1, seq_len=2048, dtype="bf16")),
}  # fmt: skip
"""Case name -> (bundled model id, options). The training cases name ``adamw-foreach``, torch's
default on CUDA, which the H200 run measured."""


# ---- measure (on the GPU) ---------------------------------------------------------------------


def _machine() -> dict[str, Any]:
    """The stack a measurement ran on, and the device memory CUDA itself takes."""
    import transformers

    torch.zeros(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    context = total - free - torch.cuda.memory_reserved()
    a = torch.ones(64, 64, device="cuda")
    (a @ a).sum().item()
    free_after, _ = torch.cuda.mem_get_info()
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "device_name": torch.cuda.get_device_name(0),
        "total_memory": torch.cuda.get_device_properties(0).total_memory,
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "module_loading": os.environ.get("CUDA_MODULE_LOADING", "(default)"),
        "context_bytes_after_init": context,
        "device_used_after_first_matmul": total - free_after,
        "reserved_after_first_matmul": torch.cuda.memory_reserved(),
    }


def _measure_case(model: str, options: dict[str, Any]) -> tuple[dict[str, Any], list[list[Any]]]:
    """One case in a fresh process: its figures over the last step, and every allocator event from
    the model's build on (so a replay can tell the event stream apart from the allocator's rules)."""
    from vramsim.config import SimulationConfig
    from vramsim.validation.measure import RealRun
    from vramsim.workload.build import build_program
    from vramsim.workload.program import run_program

    config = SimulationConfig.from_options(device="h100", **options)
    last = config.steps - 1

    class LastStep(RealRun):
        allocated_before = 0

        def begin_step(self, step: int) -> None:
            if step == last:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                self.allocated_before = torch.cuda.memory_allocated()

        def end_step(self) -> None:
            torch.cuda.synchronize()

    torch.manual_seed(0)
    observer = LastStep()
    torch.cuda.memory._record_memory_history(context=None, stacks="python", max_entries=3_000_000)
    program = build_program(model, config, device="cuda", foreach=True)
    run_program(program, observer)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    row = {
        "allocated_bytes": torch.cuda.max_memory_allocated(),
        "reserved_bytes": torch.cuda.max_memory_reserved(),
        "allocated_before_step": observer.allocated_before,
        "device_used_after_step": total - free,
        "reserved_after_step": torch.cuda.memory_reserved(),
        "alloc_retries": stats.get("num_alloc_retries", 0),
        "parameters": sum(p.numel() for p in program.model.parameters()),
    }
    return row, [[e["action"], e["addr"], e["size"]] for e in snapshot["device_traces"][0]]


EXPANDABLE = ("llama3.2-1b train fp32 weights bf16-autocast", "llama3.1-8b train bf16 ckpt", "qwen2.5-0.5b forward bf16")
"""Cases measured a second time with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``."""


def _child(kind: str, name: str, path: Path) -> None:
    """Runs in its own process, so no case sees another's cuBLAS handles, kernels or cached blocks."""
    if kind == "machine":
        result: Any = _machine()
    else:
        model, options = CASES[name]
        started = time.perf_counter()
        try:
            row, events = _measure_case(model, options)
        except Exception as exc:  # an OOM or a failure is a result too
            row, events = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}, []
        row["seconds"] = round(time.perf_counter() - started, 1)
        result = {"row": row, "events": events}
    path.write_text(json.dumps(result))


def measure(out: Path, only: list[str] | None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    scratch = out / "case.json"

    def run(kind: str, name: str = "", expandable: bool = False) -> Any:
        env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else ""}
        done = subprocess.run([sys.executable, __file__, "child", kind, name, str(scratch)], env=env, check=False)
        if done.returncode != 0 or not scratch.exists():
            return None
        result = json.loads(scratch.read_text())
        scratch.unlink()
        return result

    machine = run("machine")
    if machine is None:
        print("gpu_validation: no CUDA GPU is usable here; run `measure` on a GPU machine", file=sys.stderr)
        return 1
    result: dict[str, Any] = {"machine": machine, "cases": {}}
    traces: dict[str, list[list[Any]]] = {}
    print(json.dumps(machine), flush=True)
    names = only or list(CASES)
    runs = [(name, False) for name in names] + [(name, True) for name in names if name in EXPANDABLE]
    for name, expandable in runs:
        label = name + (" expandable" if expandable else "")
        case = run("case", name, expandable) or {"row": {"error": "the case's process died"}, "events": []}
        result["cases"][label], traces[label] = case["row"], case["events"]
        print(label, json.dumps(case["row"]), flush=True)
        (out / "gpu_measured.json").write_text(json.dumps(result, indent=1))
        with gzip.open(out / "gpu_traces.json.gz", "wt") as file:
            json.dump(traces, file)
    return 0


# ---- compare (anywhere) -----------------------------------------------------------------------


def compare(path: Path, target: str) -> int:
    import vramsim

    measured = json.loads(path.read_text())
    gib = 2**30
    print(
        f"Measured on {measured['machine']['device_name']} (torch {measured['machine']['torch']}, "
        f"CUDA {measured['machine']['cuda']}); predicted for `{target}` by vramsim on torch {torch.__version__}\n"
    )
    print(
        "| case | measured alloc | predicted | error | measured reserved | predicted | error "
        "| measured device | predicted | error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, row in measured["cases"].items():
        base = name.removesuffix(" expandable")
        model, options = CASES[base][0], dict(CASES[base][1])
        if name != base:
            options["expandable_segments"] = True
        if "error" in row:
            print(f"| {name} | failed on the GPU: {row['error']} | | | | | | | | |")
            continue
        try:
            report = vramsim.simulate(model, device=target, **options)
        except vramsim.VramsimError as exc:
            print(f"| {name} | {row['allocated_bytes'] / gib:.2f} GiB | not predicted: {exc} | | | | | | | |")
            continue
        alloc_error = report.peak_bytes / row["allocated_bytes"] - 1
        reserved_error = report.reserved_bytes / row["reserved_bytes"] - 1
        device_error = report.device_bytes / row["device_used_after_step"] - 1
        print(
            f"| {name} | {row['allocated_bytes'] / gib:.2f} GiB | {report.peak_bytes / gib:.2f} GiB | "
            f"{alloc_error:+.1%} | {row['reserved_bytes'] / gib:.2f} GiB | {report.reserved_bytes / gib:.2f} GiB | "
            f"{reserved_error:+.1%} | {row['device_used_after_step'] / gib:.2f} GiB | "
            f"{report.device_bytes / gib:.2f} GiB | {device_error:+.1%} |",
            flush=True,
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="run every case on cuda:0, each in its own process, and write the measurements")
    run.add_argument("out", type=Path)
    run.add_argument("--only", nargs="*", choices=list(CASES), help="these cases only")
    child = commands.add_parser("child", help="(internal) one case or the machine facts, in this process")
    child.add_argument("kind", choices=("machine", "case"))
    child.add_argument("name")
    child.add_argument("path", type=Path)
    check = commands.add_parser("compare", help="print vramsim's prediction beside each measured figure")
    check.add_argument("file", type=Path, nargs="?", default=MEASURED)
    check.add_argument("--device", default="h200", help="the catalog target to predict for")
    args = parser.parse_args()
    if args.command == "measure":
        return measure(args.out, args.only)
    if args.command == "child":
        _child(args.kind, args.name, args.path)
        return 0
    return compare(args.file, args.device)


if __name__ == "__main__":
    sys.exit(main())
