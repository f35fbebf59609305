"""Every command's output through the CLI at 80 columns, on small bundled models: no line longer than 80, no
figure cut ("1.03 T..." or a number split from its unit across lines), no trailing spaces."""

from __future__ import annotations

import itertools
import re

import pytest
from cli_runs import run

CASES = {
    "trace": ["trace", "gpt2", "--seq-len", "16", "--device", "h100"],
    "trace that does not fit": ["trace", "gpt2", "--seq-len", "256", "--batch-size", "64", "--device", "t4"],
    "fit": ["fit", "gpt2", "--seq-len", "64", "--device", "rtx-4090"],
    "fit --strategies": ["fit", "gpt2", "--seq-len", "64", "--device", "t4", "--gpus", "2", "--strategies"],
    "serve": ["serve", "gpt2", "--device", "rtx-4090", "--max-model-len", "512", "--max-num-batched-tokens", "512"],
    "serve with LoRA, ngram and a shared prefix": [
        "serve",
        "gpt2",
        "--device",
        "rtx-4090",
        "--max-model-len",
        "512",
        "--max-num-batched-tokens",
        "512",
        "--enable-lora",
        "--max-loras",
        "8",
        "--max-lora-rank",
        "64",
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 3}',
        "--shared-prefix-len",
        "100",
    ],
    "checkpoint": ["checkpoint", "gpt2", "--seq-len", "16", "--device", "h100"],
    "inspect": ["inspect", "gpt2", "--seq-len", "16", "--device", "h100", "--depth", "4"],
    "compare": [
        "compare",
        "gpt2",
        "--seq-len",
        "16",
        "--device",
        "t4",
        "--",
        "",
        "--torch-empty-cache-steps 1 --checkpointing selective:torchtitan",
        "--dtype fp32 --mixed-precision bf16",
    ],
    "compare --serve": [
        "compare",
        "gpt2",
        "--serve",
        "--device",
        "rtx-4090",
        "--max-model-len",
        "512",
        "--max-num-batched-tokens",
        "512",
        "--",
        "",
        "--kv-cache-dtype fp8",
        "--engine sglang --gpu-memory-utilization 0.5",
        "--gpu-memory-utilization 0.01",
    ],
    "gpus": ["gpus"],
    "models": ["models"],
}
"""Each command on gpt2 (bundled, 124M parameters), the job that does not fit with its traced advice, compare with
labels longer than their column (``--serve``: with a variant vLLM would not start and its reason)."""

_UNITS = r"(?:[KMGT]i?B|B|bytes|s|%|GPUs?|tokens?)\b"
_CUT = re.compile(r"…|\d\s*[KMGT]?\w{0,2}\.\.\.(?!\w)")
"""A figure rich's overflow cut ("1.03 T…"), or one cut with three dots."""


def _problems(out: str) -> list[str]:
    lines = out.splitlines()
    found = [f"{len(line)} columns: {line!r}" for line in lines if len(line) > 80]
    found += [f"trailing spaces: {line!r}" for line in lines if line != line.rstrip()]
    found += [f"cut figure: {line!r}" for line in lines if _CUT.search(line)]
    found += [
        f"number split from its unit: {before!r} / {after!r}"
        for before, after in itertools.pairwise(lines)
        if re.search(r"\d$", before) and re.match(rf"\s*{_UNITS}", after)
    ]
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_fits_80_columns(case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run(capsys, *CASES[case])
    assert code == 0, err
    assert out.strip()
    assert _problems(out) == []


def test_the_checks_catch_what_they_name() -> None:
    """Each problem the test looks for is caught in a sample of it."""
    samples = ["x" * 81, "ends with a space ", "peak 1.03 T…", "held 12.5 G...", "of 23.64\nGiB usable"]
    assert [len(_problems(sample)) for sample in samples] == [1, 1, 1, 1, 1]
    assert _problems("peak 1.03 TiB\nfine ... words") == []
