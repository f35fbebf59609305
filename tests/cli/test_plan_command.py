"""``vramsim plan`` through the CLI: a bad sheet is one line and exit 2 before anything is traced, a job no offer
holds exits 3 with --fail-if-none, the ranked table fits 80 columns, with --json and --html, and --stop-after says
what is paid anyway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers
from cli_runs import count_traces, run, saved_config

import vramsim

SMALL = """
currency = "EUR"

[[offer]]
name = "small"
provider = "Cloud C"
gpu = "custom:700MiB:sm_86"
gpus_per_node = 2
nodes = 1
interconnect = "pcie"
price = { day = 5.00 }
"""


def _model(tmp_path: Path, tiny_llama: transformers.LlamaConfig) -> str:
    return saved_config(tmp_path / "model", tiny_llama)


def _sheet(tmp_path: Path, text: str) -> str:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_bad_sheet_is_one_line_and_exit_2(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _model(tmp_path, tiny_llama)
    sheet = _sheet(tmp_path, SMALL.replace("day = 5.00", "fortnight = 5.00"))
    code, out, err = run(capsys, "plan", model, "--prices", sheet, "--days", "1")
    assert code == 2 and out == ""
    assert err == (
        f"vramsim: error: {sheet}: offer 'small': price: unknown period 'fortnight'; choose any of: hour, day, week, month\n"
    )
    code, _, err = run(capsys, "plan", model, "--prices", _sheet(tmp_path, SMALL), "--days", "1", "--mfu", "0.5")
    assert code == 2 and err.count("\n") == 1 and "--mfu" in err


def test_fail_if_none_exits_3_when_no_offer_holds_the_job(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    """512 MiB less the headroom is below the GPU's own overheads (592 MB): no setting, no change of program fits."""
    sheet = _sheet(tmp_path, SMALL.replace("700MiB", "512MiB"))
    args = ("plan", _model(tmp_path, tiny_llama), "--seq-len", "64", "--prices", sheet, "--days", "1", "--quiet")
    code, out, _ = run(capsys, *args, "--fail-if-none", "--json")
    found = json.loads(out)
    assert code == 3 and found["rows"] == [] and found["unfit"] == ["small"] and found["advice_offer"] == "small"
    assert len(found["key"]) == 64


def test_the_table_fits_80_columns_with_json_and_html(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    page = tmp_path / "plan.html"
    args = ("plan", _model(tmp_path, tiny_llama), "--seq-len", "64", "--prices", _sheet(tmp_path, SMALL), "--days", "10")
    code, out, err = run(capsys, *args, "--quiet", "--html", str(page))
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), out
    row = next(line for line in lines if line.startswith("small"))
    assert row.split()[1] == "1" and row.endswith("50.00")  # 10 days x 5.00; two GPUs do not fit
    words = " ".join(out.split())  # where a line wraps depends on the temporary folder's name, which varies
    assert "Order key" in words and "not from vramsim" in words
    assert "Where to rent" in page.read_text(encoding="utf-8") and "50.00 EUR" in page.read_text(encoding="utf-8")


def test_stop_after_shows_what_is_paid_anyway(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """10 days with a week price: a week and 3 days, 30.00 + 15.00 = 45.00 (two weeks 60.00, ten days 50.00);
    stopped after 2 days the week is started and paid whole: 30.00. The cheapest's itemised bill says so."""
    monkeypatch.setenv("COLUMNS", "80")
    sheet = _sheet(tmp_path, SMALL.replace("price = { day = 5.00 }", "price = { day = 5.00, week = 30.00 }"))
    args = ("plan", _model(tmp_path, tiny_llama), "--seq-len", "64", "--prices", sheet, "--days", "10", "--quiet")
    code, out, err = run(capsys, *args, "--stop-after", "2d")
    assert code == 0, err
    rows = [" ".join(line.strip("│┃ ").split()) for line in out.splitlines()]
    assert "GPU │ 1 week │ 1 │ 30.00 EUR │ 30.00 EUR" in rows and "GPU │ 3 days │ 1 │ 5.00 EUR │ 15.00 EUR" in rows
    assert "total │ │ │ │ 45.00 EUR" in rows and "stopped after 2.0d (48h) │ │ │ │ 30.00 EUR" in rows
    assert all(len(line) <= 80 and line == line.rstrip() for line in out.splitlines()), out
    code, _, err = run(capsys, *args, "--stop-after", "11d")
    assert code == 2 and err == "vramsim: error: --stop-after is within the job: at most its 240 hours; got 264 hours\n"
    with pytest.raises(SystemExit) as exit_info:  # argparse refuses a span without its unit itself
        run(capsys, *args, "--stop-after", "2")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "h (hours) or d (days)" in err


def test_a_job_that_fits_nowhere_says_what_would(
    tmp_path: Path, tiny_llama: transformers.LlamaConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 x 256 tokens on one GPU of 650 MiB (585 usable): no checkpointing choice holds it; a batch of one does,
    at the figure ``simulate`` gives that job (576 MiB), and --fail-if-none still exits 3."""
    sheet = _sheet(tmp_path, SMALL.replace("700MiB", "650MiB").replace("gpus_per_node = 2", "gpus_per_node = 1"))
    model = _model(tmp_path, tiny_llama)
    job = ("--batch-size", "8", "--seq-len", "256")
    traced = count_traces(monkeypatch)
    code, out, _ = run(capsys, "plan", model, *job, "--prices", sheet, "--days", "1", "--quiet", "--fail-if-none", "--json")
    found = json.loads(out)
    assert code == 3 and found["rows"] == [] and found["unfit"] == ["small"] and found["advice_offer"] == "small"
    assert found["traces"] == len(traced) > 1  # the advice's searches traced programs of their own, counted
    advice = found["advice"][0]
    assert advice["fits"] and advice["changes"]["batch_size"] == 1
    options = {k: v for k, v in advice["changes"].items() if k != "gpus"}
    report = vramsim.simulate(tiny_llama, device="custom:650MiB:sm_86", task="train", seq_len=256, advice="none", **options)
    assert advice["device_bytes"] == report.device_bytes <= 0.9 * 650 * 2**20
