"""What the GPT-NeoX SDPA table's 2024 stack holds that today's does not: measured on the CPU, and traced.

The Pythia-410m rows of ``benchmarks/published_gpu.py`` were measured with PyTorch 2.2.1 and the
transformers of huggingface/transformers#31031 (4.42). ``measure`` runs that table's loop
(``outputs = model(input_ids, attention_mask); loss = outputs.logits.sum(); loss.backward()``,
``outputs`` kept alive, no optimizer, two steps) on a GPT-NeoX shaped like pythia-410m (64-wide heads,
rotary_pct 0.25, 4x MLP, parallel residual; hidden 256 and vocab 4096 by default, which a CPU without
float16/bfloat16 matmuls runs in seconds) and reads the last step's peak from c10's allocator through
the profiler, as vramsim's ground truth does. It also lists the bytes held when the forward ends (what
autograd saved and ``outputs`` holds) by the op that made them. It needs nothing but torch and
transformers, so it runs in a venv of either stack:

    python3 -m venv /work/venvs/neox-2024
    /work/venvs/neox-2024/bin/pip install torch==2.2.1 transformers==4.42.0 "numpy<2"
    /work/venvs/neox-2024/bin/python benchmarks/neox_stack_difference.py measure > old.json  # ~20 min, 2 cores
    python benchmarks/neox_stack_difference.py measure > new.json      # today's torch and transformers
    python benchmarks/neox_stack_difference.py compare old.json new.json

``compare`` prints each shape's difference, its fit over layers and tokens, and the held bytes by
maker where the stacks differ. A venv with transformers 4.42 beside torch 2.13 separates the model
code from torch's kernels. The three venvs' outputs are ``benchmarks/measured/neox_cpu_*.json``.

vramsim's own figures for the table, traced through transformers 4.42's model code, come from
``benchmarks/published_gpu.py --only pythia --python transformers-4.42=PATH`` (the README's
"Against published GPU measurements" has the venv).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
import transformers
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

SHAPES = [  # layers, batch, seq: two layer counts and three token counts, one batch split
    (2, 1, 256), (2, 1, 512), (2, 1, 1024), (4, 1, 512), (4, 1, 1024), (2, 2, 512),
]  # fmt: skip
STEP = "neox_stack_difference::last_step"


def _model(layers: int, attention: str, hidden: int, vocab: int, dtype: torch.dtype) -> torch.nn.Module:
    """pythia-410m's shape (its config.json: hidden 1024, vocab 50304) with ``layers`` layers, random weights in
    ``dtype``; ``hidden`` and ``vocab`` smaller keep a CPU without float16 matmuls quick. Heads stay 64 wide
    (16 rotary dims) and the MLP 4x hidden, as in pythia."""
    shape: dict[str, Any] = dict(  # the config.json's names, which transformers 4.42 and 5.x both read
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
        rotary_pct=0.25,
        rotary_emb_base=10000,
        max_position_embeddings=2048,
        use_parallel_residual=True,
        attention_dropout=0.0,
        hidden_dropout=0.0,
        tie_word_embeddings=False,
    )
    config = transformers.GPTNeoXConfig(**shape)
    dtype_key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    model = transformers.GPTNeoXForCausalLM._from_config(config, attn_implementation=attention, **{dtype_key: dtype})
    return model.train()


def _inputs(batch: int, seq: int, vocab: int) -> dict[str, torch.Tensor]:
    """The table's inputs: token ids and an all-ones attention mask."""
    return {"input_ids": torch.randint(0, vocab, (batch, seq)), "attention_mask": torch.ones(batch, seq, dtype=torch.long)}


def _events(prof: profile) -> list[Any]:
    assert prof.profiler is not None and prof.profiler.kineto_results is not None  # set when the profile ends
    out, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        out.append(event)
        stack.extend(event.children)
    return out


def _peak_in_step(prof: profile) -> int:
    """Highest live total inside the last step, counted from the first allocation the profile saw."""
    events = _events(prof)
    mark = next(e for e in events if e.name == STEP)
    allocations = sorted((e for e in events if e.tag == torch._C._profiler._EventType.Allocation), key=lambda e: e.start_time_ns)
    first = allocations[0].typed[1]
    baseline = first.total_allocated - first.alloc_size
    return max(
        e.typed[1].total_allocated - baseline
        for e in allocations
        if e.typed[1].alloc_size > 0 and mark.start_time_ns <= e.start_time_ns <= mark.end_time_ns
    )


class _Producers(TorchDispatchMode):
    """Which op made each storage (by its data pointer), so held bytes can be told by their maker."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, str] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in _tensors([args, kwargs or {}])}
        for tensor in _tensors(out):
            ptr = tensor.untyped_storage().data_ptr()
            if ptr not in inputs:  # a new storage (a view or in-place op returns an input's); addresses are reused
                dtype = str(tensor.dtype).replace("torch.", "")
                self.made[ptr] = f"{func.__name__} {dtype} [..., {tensor.shape[-1] if tensor.dim() else ''}]"
        return out


def _held_by_maker(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[int, dict[str, int]]:
    """One forward: the storages autograd saved plus those ``outputs`` holds (weights and buffers left out),
    grouped by the op that made them and the size of their last dimension."""
    held: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        held[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    producers = _Producers()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), producers:
        outputs = model(**inputs)
        loss = outputs.logits.sum()
    for tensor in _tensors(outputs):
        held[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
    weights = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    groups: dict[str, int] = defaultdict(int)
    for ptr, nbytes in held.items():
        if ptr not in weights and ptr in producers.made:
            groups[producers.made[ptr]] += nbytes
    del loss, outputs
    return sum(groups.values()), dict(sorted(groups.items(), key=lambda item: -item[1]))


def _tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor inside a model output (tuples, dicts, caches with ``key_cache``/``layers``)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    found = []
    for name in ("key_cache", "value_cache", "layers", "keys", "values"):
        if hasattr(value, name):
            found += _tensors(getattr(value, name))
    return found


def measure_shape(
    layers: int, batch: int, seq: int, attention: str, hidden: int, vocab: int, dtype: torch.dtype
) -> dict[str, Any]:
    """The table's loop, two steps; the peak of the second (``outputs`` of the first still alive as it starts)."""
    torch.manual_seed(0)
    gc.collect()
    model = _model(layers, attention, hidden, vocab, dtype)
    inputs = _inputs(batch, seq, vocab)
    held, by_maker = _held_by_maker(model, inputs)
    model.zero_grad()
    gc.collect()
    gc.disable()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            outputs = None
            for step in range(2):
                with torch.profiler.record_function(STEP if step == 1 else "first_step"):
                    outputs = model(**inputs)
                    loss = outputs.logits.sum()
                    loss.backward()
                    model.zero_grad()
            del outputs, loss
    finally:
        gc.enable()
    shape = dict(layers=layers, batch=batch, seq=seq, attention=attention, hidden=hidden, vocab=vocab, dtype=str(dtype))
    return dict(
        **shape,
        peak=_peak_in_step(prof),
        held_after_forward=held,
        held_by_maker=by_maker,
        use_cache=bool(getattr(model.config, "use_cache", False)),
    )


def measure(args: argparse.Namespace) -> None:
    layers, batch, seq = (int(x) for x in args.only.split(",")) if args.only else (0, 0, 0)
    shapes = [(layers, batch, seq)] if args.only else SHAPES
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    rows = [measure_shape(*shape, attention, args.hidden, args.vocab, dtype) for shape in shapes for attention in args.attention]
    json.dump(
        dict(torch_version=torch.__version__, transformers_version=transformers.__version__, rows=rows), sys.stdout, indent=1
    )
    print()


def _fit(points: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Least squares of diff = a + b * tokens * layers + c * tokens over (tokens, layers, diff)."""
    import numpy as np

    rows = np.array([[1.0, tokens * layers, tokens] for tokens, layers, _ in points])
    values = np.array([diff for _, _, diff in points])
    solution, *_ = np.linalg.lstsq(rows, values, rcond=None)
    return float(solution[0]), float(solution[1]), float(solution[2])


def compare(args: argparse.Namespace) -> None:
    old, new = (json.loads(Path(path).read_text()) for path in (args.old, args.new))
    print(
        f"old: torch {old['torch_version']}, transformers {old['transformers_version']}; "
        f"new: torch {new['torch_version']}, transformers {new['transformers_version']}"
    )
    key = ("layers", "batch", "seq", "attention", "hidden", "vocab", "dtype")
    by_key = {tuple(row[k] for k in key): row for row in new["rows"]}
    for attention in sorted({row["attention"] for row in old["rows"]}):
        points_peak, points_held = [], []
        print(f"\n{attention}: layers batch seq | peak old new diff MiB | held-after-forward old new diff MiB")
        for row in (r for r in old["rows"] if r["attention"] == attention):
            other = by_key.get(tuple(row[k] for k in key))
            if other is None:
                continue
            tokens = row["batch"] * row["seq"]
            peak_diff, held_diff = row["peak"] - other["peak"], row["held_after_forward"] - other["held_after_forward"]
            points_peak.append((tokens, row["layers"], peak_diff))
            points_held.append((tokens, row["layers"], held_diff))
            print(
                f"  {row['layers']} {row['batch']} {row['seq']} | {row['peak'] / 2**20:.1f} {other['peak'] / 2**20:.1f} "
                f"{peak_diff / 2**20:+.1f} | {row['held_after_forward'] / 2**20:.1f} "
                f"{other['held_after_forward'] / 2**20:.1f} {held_diff / 2**20:+.1f}"
            )
        for label, points in (("peak", points_peak), ("held", points_held)):
            if len(points) >= 3:
                const, per_token_layer, per_token = _fit(points)
                print(
                    f"  {label} difference = {const / 2**20:+.1f} MiB + {per_token_layer:+.0f} B/token/layer "
                    f"+ {per_token:+.0f} B/token"
                )
        _print_makers(old, new, attention)


def _print_makers(old: dict[str, Any], new: dict[str, Any], attention: str) -> None:
    """Held bytes by maker in the largest shape both measured, per token and layer, where the stacks differ."""
    shapes = {(r["layers"], r["batch"], r["seq"]): r for r in old["rows"] if r["attention"] == attention}
    others = {(r["layers"], r["batch"], r["seq"]): r for r in new["rows"] if r["attention"] == attention}
    common = [shape for shape in shapes if shape in others]
    if not common:
        return
    layers, batch, seq = max(common, key=lambda shape: shape[0] * shape[1] * shape[2])
    row, other = shapes[layers, batch, seq], others[layers, batch, seq]
    per = layers * batch * seq
    print(f"  held after the forward, B per token per layer (hidden {row['hidden']}; {layers} layers x {batch * seq} tokens):")
    for label in sorted(set(row["held_by_maker"]) | set(other["held_by_maker"])):
        a, b = row["held_by_maker"].get(label, 0), other["held_by_maker"].get(label, 0)
        if a != b:
            print(f"    {label:<60} old {a / per:8.1f}  new {b / per:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("measure", help="run the shapes in this venv's stack, print JSON")
    run.add_argument("--only", default="", help="one shape as LAYERS,BATCH,SEQ")
    run.add_argument("--attention", nargs="+", default=["sdpa", "eager"])
    run.add_argument("--threads", type=int, default=2)
    run.add_argument(
        "--dtype",
        default="bfloat16",
        help="float16 where the CPU kernels take it (torch 2.2's CPU "
        "LayerNorm does not): bfloat16 has float16's size and the same float32 promotions",
    )
    run.add_argument("--hidden", type=int, default=256, help="hidden size (pythia-410m: 1024)")
    run.add_argument("--vocab", type=int, default=4096, help="vocabulary (pythia-410m: 50304)")
    both = sub.add_parser("compare", help="the difference between two measure outputs")
    both.add_argument("old")
    both.add_argument("new")
    args = parser.parse_args()
    {"measure": measure, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main()
