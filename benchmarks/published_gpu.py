"""vramsim against GPU memory figures other people measured and published.

Each ``Case`` is one figure from a public page (its URL and a short quote), the workload as
that page ran it (model, batch, sequence, dtype, optimizer, attention implementation, the
loss and inputs of its script) and what was read: ``allocated``
(``torch.cuda.max_memory_allocated``), ``reserved`` (``max_memory_reserved``) or ``device``
(``nvidia-smi`` / NVML "used", the process's context included). vramsim is asked the same
question on the catalog GPU the source used and its matching figure (``peak_bytes``,
``reserved_bytes`` or ``device_bytes``) is compared. Nothing here is tuned per case: a case
holds the source's workload, never a correction.

A case vramsim cannot ask yet (a GPU missing from the catalog, 8-bit optimizers, bitsandbytes
quantization, flash-attn 2) is written with the option names it will take
(``attn_implementation=``, ``quantization=``, ``optimizer="adamw8bit"``) and is reported as
"not answerable yet" with vramsim's own one-line refusal, so the row fills in once the option
lands. The figures are third-party measurements, unlike ``benchmarks/gpu_validation.py``,
which measures vramsim's own cases on a GPU we ran.

A case whose source ran a transformers whose model code holds other memory than today's records
that release (``Case.transformers``): vramsim traces the model code of the transformers installed
beside it, so the case is asked in an interpreter that has that release, given on the command line
(``--python transformers-4.42=/path/to/venv/bin/python``, vramsim installed there too); the script
runs itself there for that one case and reads its figures back as JSON. Without one, today's
transformers answers and the row says so.

Run: ``python benchmarks/published_gpu.py`` (prints a Markdown table; a few minutes on two
cores, most of it the 15.5B generate case); ``--only SUBSTRING`` runs the matching cases.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import transformers
from transformers import BitsAndBytesConfig

MB = 10**6
"""The benchmark scripts behind the transformers model-doc SDPA tables print bytes * 1e-6 as "MB"."""
MiB = 2**20
"""NVML / nvidia-smi "MB" and ``info.used // 1024**2`` are MiB."""
GiB = 2**30
"""``bytes / 1024 / 1024 / 1024`` (the "Optimizing LLMs" guide's ``bytes_to_giga_bytes``)."""

Measured = Literal["allocated", "reserved", "device"]
REPORT_FIELD: dict[Measured, str] = {"allocated": "peak_bytes", "reserved": "reserved_bytes", "device": "device_bytes"}
"""The ``Report`` field that answers each kind of published figure."""


@dataclass(frozen=True)
class Case:
    """One published figure and the workload that produced it."""

    name: str
    source: str
    """URL of the page that prints the figure."""
    quote: str
    """The figure as the page prints it, with enough words around it to find it."""
    stack: str
    """What the source ran on: GPU, library versions, how the figure was read."""
    device: str
    """The vramsim target for the source's GPU (``vramsim gpus``)."""
    model: str
    """A bundled model id (``vramsim models``)."""
    options: dict[str, Any]
    """``simulate`` options reproducing the source's workload; ``attn_implementation`` included."""
    measured: Measured
    figure: int
    """The published figure in bytes."""
    unavailable: str | None = None
    """Why the source's workload cannot be written as vramsim options at all (None: it can)."""
    transformers: str | None = None
    """The transformers release (``major.minor``) the case is asked with, where the model code the source ran holds
    other memory than today's: the source's release, or, for a source older than any vramsim runs on, the oldest
    release whose model code holds what the source's did (``stack`` names the source's); None: any answers it."""


@dataclass
class Row:
    """A case's outcome: vramsim's figure, or why it was not answered."""

    case: Case
    predicted: int | None = None
    refused: str | None = None
    seconds: float = field(default=0.0)
    traced_with: str = field(default=transformers.__version__)
    """The transformers whose model code vramsim traced."""

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.case.figure - 1

    @property
    def off_stack(self) -> bool:
        """The case asks another transformers than the one that answered."""
        return self.case.transformers is not None and not same_release(self.case.transformers, self.traced_with)

    @property
    def stack_note(self) -> str:
        if self.case.transformers is None:
            return ""
        if self.off_stack:
            return f" (transformers {self.traced_with}, not the case's {self.case.transformers})"
        return f" (transformers {self.traced_with})"


def same_release(release: str, version: str) -> bool:
    """Whether ``version`` (``4.42.4``) is of ``release`` (``4.42``)."""
    return version.split(".")[: len(release.split("."))] == release.split(".")


def _ids(batch: int, seq: int) -> dict[str, torch.Tensor]:
    """``input_ids`` only, as the transformers SDPA benchmark scripts feed masked LMs."""
    return {"input_ids": torch.zeros(batch, seq, dtype=torch.long)}


def _ids_and_mask(batch: int, seq: int) -> dict[str, torch.Tensor]:
    """``input_ids`` and an all-ones ``attention_mask``, as the causal-LM SDPA benchmark scripts feed them."""
    return {"input_ids": torch.zeros(batch, seq, dtype=torch.long), "attention_mask": torch.ones(batch, seq, dtype=torch.long)}


def _ids_and_class_labels(batch: int, seq: int) -> dict[str, torch.Tensor]:
    """The "model memory anatomy" dataset: ``input_ids`` and a binary label per sequence, nothing else."""
    return {"input_ids": torch.zeros(batch, seq, dtype=torch.long), "labels": torch.zeros(batch, dtype=torch.long)}


class HeldLogitsSum:
    """The SDPA benchmark scripts' loop: ``outputs = model(**inputs); loss = outputs.logits.sum(); loss.backward()``.

    ``outputs`` is a variable of the loop, so the step's logits stay alive through its backward and through
    the next step's forward, until ``outputs`` is rebound; this loss holds them the same way. One per case.
    """

    def __init__(self) -> None:
        self.outputs: Any = None

    def __call__(self, outputs: Any) -> torch.Tensor:
        self.outputs = outputs
        return outputs.logits.sum()


# ---- transformers "Model training anatomy" / "Efficient training on a single GPU" (V100 16GB) ---------------------

_ANATOMY = "https://huggingface.co/docs/transformers/model_memory_anatomy"
_ONE_GPU = "https://huggingface.co/docs/transformers/v4.20.0/en/perf_train_gpu_one"
_ANATOMY_STACK = (
    "Tesla V100-SXM2-16GB, driver 460.91.03 / CUDA 11.2 (nvidia-smi in the page), PyTorch 1.10, "
    "transformers Trainer of Jan 2022 (default optim adamw_hf, model.zero_grad()), NVML used memory after "
    "trainer.train()"
)


class Trainer2022AdamW(torch.optim.AdamW):
    """The Trainer of early 2022: AdamW stepping one parameter at a time (its default ``adamw_hf`` did), and
    ``model.zero_grad()`` on torch 1.x, which zeroes the gradients in place, so they stay allocated all step."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, lr=5e-5, foreach=False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=False)


class Trainer2022Adafactor(torch.optim.Adafactor):
    """``optim="adafactor"`` in the Trainer of early 2022 (factored states, one parameter at a time), gradients
    zeroed in place as above."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, lr=5e-5, foreach=False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=False)


def trainer2022_adam8bit(params: Any) -> torch.optim.Optimizer:
    """The page's ``bnb.optim.Adam8bit(optimizer_grouped_parameters, betas, eps, lr)`` handed to the Trainer
    (``optimizers=(adam_bnb_optim, None)``); its two groups differ only in ``weight_decay``, 0.0 in both (the
    ``TrainingArguments`` default). The Trainer zeroes gradients with ``model.zero_grad()`` whatever the optimizer
    (transformers 4.16 trainer.py, after each ``optimizer.step()``), in place on torch 1.10 (``Module.zero_grad(
    set_to_none=False)``), so the gradients stay allocated through the next step as with its AdamW. The 2022
    bitsandbytes (0.3x) kept the same uint8 states, with one float32 absmax per 2048 elements where today's keeps
    one per 256 (``Optimizer2State.init_state``): 9 MiB less for BERT-large, not modelled."""
    import bitsandbytes as bnb

    optimizer: torch.optim.Optimizer = bnb.optim.Adam8bit(params, lr=5e-5, betas=(0.9, 0.999), eps=1e-8)

    def zero_grad(set_to_none: bool = True) -> None:
        torch.optim.Optimizer.zero_grad(optimizer, set_to_none=False)

    optimizer.zero_grad = zero_grad  # type: ignore[method-assign]
    return optimizer


_ANATOMY_BASE: dict[str, Any] = dict(
    model_class="AutoModelForSequenceClassification",
    seq_len=512,
    attn_implementation="eager",
    inputs=_ids_and_class_labels,
    optimizer=Trainer2022AdamW,
    cuda_module_loading="eager",
    torch_autograd="1.10",
)
"""CUDA 11.2 predates lazy module loading (11.7): the context holds every libtorch_cuda kernel. PyTorch 1.10's
softmax saved its input for backward (benchmarks/saved_by_torch_release.py measures it on that stack)."""


_ANATOMY_TRANSFORMERS = "4.42"
"""The page ran transformers 4.16-4.20, older than any vramsim runs on; 4.42's eager BERT holds what theirs held.
Given no ``attention_mask``, their ``BertModel.forward`` makes one of ones (4.16 modeling_bert.py:956) and
``get_extended_attention_mask`` casts it to the weights' dtype (modeling_utils.py:305-306: float32 under fp16
autocast), so ``attention_scores + attention_mask`` (modeling_bert.py:327) promotes autocast's float16 scores to
float32 before the softmax, which then keeps float32 input and output per layer; 4.42 does the same
(modeling_bert.py:1085-1086, modeling_utils.py:1087-1088); transformers 5 adds no mask and softmaxes float16
scores. The checkpointed rows ask today's transformers: 4.42's BERT has no per-layer checkpoint call site to
mark, and there the promotion is one recomputed layer's softmax input at batch 1 kept in float32 rather than
float16 (16 heads x 512 x 512 x 2 bytes = 8 MiB more)."""


def _anatomy(name: str, source: str, quote: str, mib: int, **options: Any) -> Case:
    return Case(
        name,
        source,
        quote,
        _ANATOMY_STACK,
        "v100-16gb",
        "google-bert/bert-large-uncased",
        {**_ANATOMY_BASE, **options},
        "device",
        mib * MiB,
        transformers=None if "checkpointing" in options else _ANATOMY_TRANSFORMERS,
    )


ANATOMY = [
    _anatomy("bert-large train b4 fp32 (Trainer)", _ANATOMY,
             "per_device_train_batch_size=4 ... GPU memory occupied: 14949 MB.", 14949, batch_size=4),
    _anatomy("bert-large train b1x4 grad-accum", _ONE_GPU,
             "per_device_train_batch_size=1, gradient_accumulation_steps=4 ... GPU memory occupied: 8681 MB.", 8681,
             batch_size=1),
    _anatomy("bert-large train b1x4 grad-ckpt", _ONE_GPU,
             "gradient_accumulation_steps=4, gradient_checkpointing=True ... GPU memory occupied: 6775 MB.", 6775,
             batch_size=1, checkpointing="full"),
    _anatomy("bert-large train b4 fp16 amp", _ONE_GPU,
             "per_device_train_batch_size=4, fp16=True ... GPU memory occupied: 13939 MB.", 13939,
             batch_size=4, mixed_precision="fp16"),
    _anatomy("bert-large train b1x4 grad-ckpt fp16", _ONE_GPU,
             "gradient_checkpointing=True, fp16=True ... GPU memory occupied: 7275 MB.", 7275,
             batch_size=1, checkpointing="full", mixed_precision="fp16"),
    _anatomy("bert-large train b4 adafactor", _ONE_GPU,
             'per_device_train_batch_size=4, optim="adafactor" ... GPU memory occupied: 12295 MB.', 12295,
             batch_size=4, optimizer=Trainer2022Adafactor),
    _anatomy("bert-large train b1x4 grad-ckpt fp16 adafactor", _ONE_GPU,
             'gradient_checkpointing=True, fp16=True, optim="adafactor" ... GPU memory occupied: 4847 MB.', 4847,
             batch_size=1, checkpointing="full", mixed_precision="fp16", optimizer=Trainer2022Adafactor),
    _anatomy("bert-large train b4 8-bit Adam", _ONE_GPU,
             "bnb.optim.Adam8bit ... GPU memory occupied: 13085 MB.", 13085, batch_size=4,
             optimizer=trainer2022_adam8bit),
    _anatomy("bert-large train b1x4 grad-ckpt fp16 8-bit Adam", _ONE_GPU,
             "gradient_checkpointing=True, fp16=True ... optimizers=(adam_bnb_optim, None) ... GPU memory occupied: "
             "5363 MB.", 5363, batch_size=1, checkpointing="full", mixed_precision="fp16",
             optimizer=trainer2022_adam8bit),
]  # fmt: skip

# ---- transformers BERT model doc, SDPA training table (A100-80GB) --------------------------------------------------

_BERT_DOC = "https://huggingface.co/docs/transformers/v4.48.0/en/model_doc/bert#using-scaled-dot-product-attention-sdpa"
_BERT_STACK = (
    "A100-80GB, PyTorch 2.2.0 (the doc; gist hackyon/2bfcfb59666fab23655f6e62bc0752ba of Feb 2024 prints its "
    "eager figures under 'on existing PyTorch'), transformers of PR #28802's branch (4.42's merged BERT "
    "traces as today's), float16 weights, AutoModelForMaskedLM, loss = logits.sum(), no optimizer, "
    "model.zero_grad() each step; torch.cuda.max_memory_allocated() * 1e-6"
)
_BERT_TRAIN = [  # batch, seq, eager MB, sdpa MB: the page's training table
    (4, 256, 939.213, 764.834), (4, 512, 1970.447, 1227.162), (8, 256, 1594.295, 1226.114),
    (8, 512, 3629.401, 2134.262), (16, 256, 2874.426, 2134.262), (16, 512, 6964.659, 3961.013),
]  # fmt: skip


def _sdpa_table_case(
    model: str,
    source: str,
    stack: str,
    device: str,
    attention: str,
    batch: int,
    seq: int,
    mb: float,
    model_class: str,
    inputs: Callable[[int, int], dict[str, torch.Tensor]],
    label: str,
    transformers: str | None,
) -> Case:
    column = "Eager" if attention == "eager" else "SDPA"
    return Case(
        f"{label} train b{batch} s{seq} fp16 {attention}",
        source,
        f"|{batch}|{seq}|...| {column} peak mem (MB): {mb}",
        stack,
        device,
        model,
        dict(
            task="train",
            batch_size=batch,
            seq_len=seq,
            dtype="fp16",
            optimizer=None,
            loss=HeldLogitsSum(),
            model_class=model_class,
            inputs=inputs,
            attn_implementation=attention,
        ),
        "allocated",
        round(mb * MB),
        transformers=transformers,
    )


BERT_SDPA = [
    _sdpa_table_case("google-bert/bert-base-uncased", _BERT_DOC, _BERT_STACK, "a100-80gb", attention, batch, seq, mb,
                     "AutoModelForMaskedLM", _ids, "bert-base mlm", None)
    for batch, seq, eager, sdpa in _BERT_TRAIN
    for attention, mb in (("eager", eager), ("sdpa", sdpa))
]  # fmt: skip

# ---- transformers GPT-NeoX model doc, SDPA training table (RTX 3080 Ti laptop, 16 GB) -----------------------------

_NEOX_DOC = "https://huggingface.co/docs/transformers/v4.48.0/en/model_doc/gpt_neox#using-scaled-dot-product-attention-sdpa"
_NEOX_STACK = (
    "rtx3080ti-16GB (the laptop RTX 3080 Ti, sm_86), PyTorch 2.2.1, transformers 4.42 (huggingface/transformers"
    "#31031; its GPT-NeoX holds more than today's: benchmarks/neox_stack_difference.py measures it), "
    "pythia-410m-deduped in float16, AutoModelForCausalLM, loss = logits.sum(), no optimizer; "
    "torch.cuda.max_memory_allocated() * 1e-6"
)
_NEOX_TRAIN = [  # attention, batch, seq, MB: rows of the page's training table
    ("eager", 1, 512, 2278.38), ("sdpa", 1, 512, 1953.76), ("eager", 1, 2048, 13484.1), ("sdpa", 1, 2048, 3882.01),
    ("eager", 2, 1024, 8707.55), ("sdpa", 2, 1024, 3878.86), ("eager", 4, 512, 6290.58), ("sdpa", 4, 512, 3877.29),
]  # fmt: skip

NEOX_SDPA = [
    _sdpa_table_case("EleutherAI/pythia-410m-deduped", _NEOX_DOC, _NEOX_STACK, "rtx-3080-ti", attention, batch, seq,
                     mb, "AutoModelForCausalLM", _ids_and_mask, "pythia-410m", "4.42")
    for attention, batch, seq, mb in _NEOX_TRAIN
]  # fmt: skip

# ---- transformers "Optimizing LLMs for Speed and Memory" (OctoCoder 15.5B generate) -------------------------------

_LLM_GUIDE = "https://huggingface.co/docs/transformers/llm_tutorial_optimization"
_LLM_STACK = (
    "A100 (the guide: 'can be run on a single 40 GB A100'), transformers pipeline('text-generation'), "
    "device_map='auto', max_new_tokens=60; load_in_8bit / load_in_4bit (bitsandbytes LLM.int8 / fp4, the "
    "unquantized modules in float16); torch.cuda.max_memory_allocated() / 1024**3"
)
_PROMPT_TOKENS = 20
"""'Question: Please write a function in Python that transforms bytes to Giga bytes.\\n\\nAnswer:' is about 20
StarCoder tokens (the page does not print the count; each token of KV cache is 80 KiB, so +-5 tokens is 0.4 MiB)."""
_OCTO: dict[str, Any] = dict(task="generate", batch_size=1, seq_len=_PROMPT_TOKENS, max_new_tokens=60)

OCTOCODER = [
    Case("octocoder-15.5b generate bf16", _LLM_GUIDE,
         "bytes_to_giga_bytes(torch.cuda.max_memory_allocated()) ... 29.0260648727417", _LLM_STACK, "a100-40gb",
         "bigcode/octocoder", {**_OCTO, "dtype": "bf16"}, "allocated", round(29.0260648727417 * GiB)),
    Case("octocoder-15.5b generate 8-bit (bnb)", _LLM_GUIDE, "load_in_8bit=True ... 15.219234466552734", _LLM_STACK,
         "a100-40gb", "bigcode/octocoder", {**_OCTO, "dtype": "fp16", "quantization": BitsAndBytesConfig(load_in_8bit=True)},
         "allocated",
         round(15.219234466552734 * GiB)),
    Case("octocoder-15.5b generate 4-bit (bnb)", _LLM_GUIDE, "load_in_4bit=True ... 9.543574333190918", _LLM_STACK,
         "a100-40gb", "bigcode/octocoder", {**_OCTO, "dtype": "fp16", "quantization": BitsAndBytesConfig(load_in_4bit=True)},
         "allocated",
         round(9.543574333190918 * GiB)),
]  # fmt: skip

CASES: list[Case] = [*ANATOMY, *BERT_SDPA, *NEOX_SDPA, *OCTOCODER]


# ---- asking vramsim ---------------------------------------------------------------------------------------------


def ask(case: Case, pythons: dict[str, str], script: str) -> Row:
    """The case asked with the transformers its source ran: here, or by ``script`` (the benchmark that lists the
    case) in the interpreter ``pythons`` gives for that release; with neither, here (the row says which answered)."""
    if case.transformers is not None and not same_release(case.transformers, transformers.__version__):
        python = pythons.get(case.transformers)
        if python is not None:
            return _ask_in(python, script, case)
    return _ask_here(case)


def _ask_in(python: str, script: str, case: Case) -> Row:
    """The case asked by ``script`` run in ``python`` (``--case``), its row read back from the JSON it prints."""
    command = [python, script, "--case", case.name]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Row(case, refused=f"{python} failed: {last}", traced_with="?")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return Row(case, answer["predicted"], answer["refused"], answer["seconds"], answer["traced_with"])


def _ask_here(case: Case) -> Row:
    """vramsim's figure for the case, or its one-line refusal."""
    from vramsim import simulate
    from vramsim.config import SimulationConfig
    from vramsim.errors import VramsimError
    from vramsim.workload.models import load_config

    if case.unavailable is not None:
        return Row(case, refused=case.unavailable)
    options = dict(case.options)
    source: Any = case.model
    known = SimulationConfig.__dataclass_fields__
    attention = options.get("attn_implementation")
    if attention is not None and "attn_implementation" not in known:
        # Until the option lands, eager and sdpa are asked the way transformers records them: on the config.
        if attention not in ("eager", "sdpa"):
            return Row(case, refused=f"attn_implementation={attention!r} is not modelled")
        options.pop("attn_implementation")
        source = load_config(case.model)
        source._attn_implementation = attention
    started = time.perf_counter()
    try:
        report = simulate(source, device=case.device, **options)
    except VramsimError as exc:
        return Row(case, refused=str(exc).splitlines()[0].split(";")[0])
    return Row(case, predicted=getattr(report, REPORT_FIELD[case.measured]), seconds=time.perf_counter() - started)


def _size(value: int) -> str:
    return f"{value / GiB:.2f} GiB" if value >= GiB else f"{value / MiB:.0f} MiB"


def table(rows: list[Row]) -> str:
    """The Markdown table: one line per case, then the summary over the answered ones."""
    lines = ["| case | source | measured | published | vramsim | error |", "|---|---|---|---:|---:|---:|"]
    for row in rows:
        case = row.case
        if row.predicted is None:
            predicted, error = "—", f"not answerable yet: {row.refused}"
        else:
            assert row.error is not None
            predicted, error = _size(row.predicted) + row.stack_note, f"{row.error:+.1%}"
        link = f"[{case.source.split('/')[-1].split('#')[0] or case.source}]({case.source})"
        lines.append(f"| {case.name} | {link} | {case.measured} | {_size(case.figure)} | {predicted} | {error} |")
    errors = [abs(row.error) for row in rows if row.error is not None]
    lines.append("")
    if errors:
        within = sum(error <= 0.10 for error in errors)
        off_stack = sum(row.off_stack for row in rows if row.predicted is not None)
        elsewhere = f" {off_stack} asked on a transformers other than their case's." if off_stack else ""
        lines.append(
            f"Answered {len(errors)} of {len(rows)} cases; median |error| {statistics.median(errors):.1%}; "
            f"{within} of {len(errors)} within 10%.{elsewhere}"
        )
    return "\n".join(lines)


def interpreters(values: list[str]) -> dict[str, str]:
    """``--python transformers-4.42=PATH`` values as ``{"4.42": "PATH"}``."""
    found = {}
    for value in values:
        release, _, python = value.partition("=")
        if not release.startswith("transformers-") or not python:
            raise ValueError(f"--python {value!r}: write transformers-MAJOR.MINOR=/path/to/bin/python")
        found[release.removeprefix("transformers-")] = python
    return found


def run_cases(cases: list[Case], doc: str | None) -> None:
    """The command line of a benchmark of published figures: ask vramsim each case (``--only`` filters), print the table."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="transformers-X.Y=PATH",
        help="the interpreter that asks the cases whose source ran transformers X.Y (repeatable)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case by name, answered as JSON (what --python runs)
    args = parser.parse_args()
    if args.case is not None:
        row = _ask_here(next(case for case in cases if case.name == args.case))
        print(json.dumps(dict(predicted=row.predicted, refused=row.refused, seconds=row.seconds, traced_with=row.traced_with)))
        return
    try:
        pythons = interpreters(args.python)
    except ValueError as exc:
        parser.error(str(exc))
    started = time.perf_counter()
    script = str(Path(sys.argv[0]).resolve())  # the benchmark that lists the cases, run again for --python
    rows = [ask(case, pythons, script) for case in cases if args.only in case.name]
    print(table(rows))
    print(f"\nWall time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    run_cases(CASES, __doc__)
