"""``vramsim compare --serve`` in-process: serving variants read by serve's own parser, bad ones refused in one line
before torch loads; each variant's figures are those of its own ``vramsim serve`` run, one trace shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import run

SHARED = ["gpt2", "--device", "h100-sxm", "--max-model-len", "512", "--max-num-batched-tokens", "512", "--quiet"]
"""gpt2 (bundled, 124M parameters) on an H100 SXM, a short profile forward."""

BAD_VARIANTS = {
    "--kv-cache-dtype fp9": "variant '--kv-cache-dtype fp9': unknown --kv-cache-dtype 'fp9'; choose one of: auto, fp8,",
    "--gpu-memory-utilization 1.5": "variant '--gpu-memory-utilization 1.5': --gpu-memory-utilization must be a "
    "fraction in (0, 1], got 1.5",
    "--engine tgi": "variant '--engine tgi': unknown engine 'tgi'; choose one of: vllm, sglang",
    "--device tpu9": "variant '--device tpu9': unknown device 'tpu9'",
    "--tp x": "variant '--tp x': argument --tp: invalid int value: 'x'",
    "--seq-len 16": "variant '--seq-len 16': unrecognized arguments: --seq-len 16 (see vramsim compare --serve --help)",
    "--html page.html": "variant '--html page.html': --html says how to compare, not what: give it before --",
}
"""A bad serving variant and the start of the one line that refuses it: serve's own checks, named for the variant."""


def test_bad_serving_variants_are_one_line_before_torch_loads() -> None:
    """Each bad variant exits 2 with one line naming it, and neither torch nor transformers is imported; so does
    ``--serve`` given as a trace variant's flag."""
    argvs = [["compare", "gpt2", "--serve", "--", flags, ""] for flags in BAD_VARIANTS]
    argvs.append(["compare", "gpt2", "--", "--serve", ""])
    code = (
        "import sys, contextlib, io; from vramsim.cli import main\n"
        f"for argv in {argvs!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        status = main(argv)\n"
        "    print(status, err.getvalue().strip().replace('\\n', ' | '))\n"
        "heavy = sorted({'torch', 'transformers'} & set(sys.modules)); assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    messages = [*BAD_VARIANTS.values(), "variant '--serve': --serve says how to compare, not what: give it before --"]
    assert len(lines) == len(messages)
    for line, message in zip(lines, messages, strict=True):
        assert line.startswith(f"2 vramsim: error: {message}"), line
        assert " | " not in line  # one line


def test_bf16_and_fp8_kv_cache_equal_two_serve_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gpt2's KV cache in the model's dtype and in FP8, compared from a variants file, is exactly what two
    ``vramsim serve`` runs report: the same 70.46 GiB budget holding 2,052,304 and 4,104,624 tokens (an FP8 token
    takes half the bytes; blocks of 16 round the rest), from one trace."""
    variants = tmp_path / "kv.toml"
    variants.write_text('model-dtype = ""\n[fp8]\nkv-cache-dtype = "fp8"\n')
    page = tmp_path / "kv.html"
    code, out, err = run(capsys, "compare", *SHARED, "--serve", "--json", "--variants", str(variants), "--html", str(page))
    assert code == 0, err
    compared = json.loads(out)
    assert compared["traces"] == 1 and [v["label"] for v in compared["variants"]] == ["model-dtype", "fp8"]
    served = []
    for extra in ([], ["--kv-cache-dtype", "fp8"]):
        code, out, err = run(capsys, "serve", *SHARED, "--json", *extra)
        assert code == 0, err
        served.append(json.loads(out))
    for each, alone in zip(compared["variants"], served, strict=True):
        assert each["refused"] is None
        assert {**each["report"], "trace_seconds": 0} == {**alone, "trace_seconds": 0}
    bf16, fp8 = served
    assert bf16["kv_cache_bytes"] == fp8["kv_cache_bytes"] and round(bf16["kv_cache_bytes"] / 2**30, 2) == 70.46
    assert (bf16["kv_cache_tokens"], fp8["kv_cache_tokens"]) == (2_052_304, 4_104_624)
    html = page.read_text()
    assert "Budgets side by side" in html and "2,052,304 tokens" in html and "4,104,624 tokens" in html


def test_a_variant_vllm_would_not_start_is_a_row_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """A hundredth of an RTX 4090 does not hold gpt2's weights: vLLM's "No available memory for the cache blocks",
    said in the flags' words under the table, while the other variant is budgeted; the command succeeds."""
    argv = ["compare", "gpt2", "--serve", "--device", "rtx-4090", "--max-model-len", "512", "--max-num-batched-tokens", "512"]
    code, out, err = run(capsys, *argv, "--quiet", "--", "", "--gpu-memory-utilization 0.01")
    assert code == 0, err
    assert "--gpu-memory-utilization 0.01" in out and "no (1)" in out
    assert '("No available memory for the cache blocks"): raise --gpu-memory-utilization or --tp' in " ".join(out.split())
    assert "2 variants from 1 trace" in out
