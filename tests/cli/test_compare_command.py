"""``vramsim compare`` in-process: variants after ``--`` or in a TOML file, read by trace's own parser; bad ones
refused in one line before torch loads; ``--json`` is the comparison's data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import run

import vramsim

BAD_VARIANTS = {
    "--lora-rank x": "variant '--lora-rank x': argument --lora-rank: invalid int value: 'x'",
    "--quantization nf5": "variant '--quantization nf5': unknown quantization 'nf5'; choose one of: nf4,",
    "--bogus 3": "variant '--bogus 3': unrecognized arguments: --bogus 3 (see vramsim compare --help)",
    "--json": "variant '--json': --json says how to compare, not what: give it before --",
    '--checkpointing "full': "variant '--checkpointing \"full': No closing quotation",
}
"""A bad variant and the start of the one line that refuses it."""


def test_bad_variants_are_one_line_before_torch_loads() -> None:
    """Each bad variant exits 2 with one line naming it, and neither torch nor transformers is imported."""
    code = (
        "import sys, contextlib, io; from vramsim.cli import main\n"
        f"for flags in {list(BAD_VARIANTS)!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        status = main(['compare', 'gpt2', '--', flags, ''])\n"
        "    print(status, err.getvalue().strip().replace('\\n', ' | '))\n"
        "heavy = sorted({'torch', 'transformers'} & set(sys.modules)); assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(BAD_VARIANTS)
    for line, message in zip(lines, BAD_VARIANTS.values(), strict=True):
        assert line.startswith(f"2 vramsim: error: {message}"), line
        assert " | " not in line  # one line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--", "--lora-rank 16"], "compare takes two or more variants, got 1: give them after --"),
        ([], "compare takes two or more variants, got 0"),
        (["--", "--lora-rank 16", "--lora-rank 16 "], "variant '--lora-rank 16' is given twice after --"),
        (["--variants", "missing.toml"], "--variants missing.toml: No such file or directory"),
    ],
)
def test_too_few_or_repeated_variants_are_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compare", "gpt2", *argv)
    assert code == 2 and not out
    assert err.startswith(f"vramsim: error: {message}") and err.count("\n") == 1


def test_variants_file_is_refused_when_not_variants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A value that is neither a flags string nor a table, and a file that is not TOML, are one line each."""
    (tmp_path / "number.toml").write_text('lora = 16\nfull = ""\n')
    (tmp_path / "broken.toml").write_text('lora = "--lora-rank 16\n')
    for name, message in (("number", "lora = 16; give a flags string or a table of flags"), ("broken", "is not TOML")):
        code, _, err = run(capsys, "compare", "gpt2", "--variants", str(tmp_path / f"{name}.toml"))
        assert code == 2 and message in err and err.count("\n") == 1


def test_html_overlays_each_variants_timeline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--html``: one page with a line per variant, each line's peak the variant's own ``peak_bytes``."""
    page = tmp_path / "compare.html"
    shared = ["gpt2", "--seq-len", "16", "--device", "t4"]
    code, out, err = run(capsys, "compare", *shared, "--json", "--html", str(page), "--", "", "--batch-size 16")
    assert code == 0 and f"wrote {page}" in err
    text = page.read_text()
    assert text.count("<script") >= 1 and 'src="http' not in text
    peaks = [variant["report"]["peak_bytes"] for variant in json.loads(out)["variants"]]
    assert peaks[0] != peaks[1]
    for label, peak in zip(("(shared flags)", "--batch-size 16"), peaks, strict=True):
        assert label in text and str(peak) in text


def test_json_matches_the_api_and_shares_a_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """Variants after -- over the shared flags (the variant's --seq-len wins over the shared one): the JSON's
    figures are ``vramsim.compare``'s, and the two checkpointing variants share the first trace."""
    shared = ["gpt2", "--seq-len", "16", "--device", "t4"]
    code, out, _ = run(capsys, "compare", *shared, "--json", "--", "", "--checkpointing full", "--seq-len 32")
    assert code == 0
    data = json.loads(out)
    assert [v["label"] for v in data["variants"]] == ["", "--checkpointing full", "--seq-len 32"]
    assert data["traces"] == 2 and [v["trace"] for v in data["variants"]] == [0, 0, 1]
    assert data["variants"][2]["report"]["options"]["seq_len"] == 32
    api = vramsim.compare(
        "gpt2",
        {"": {}, "full": {"checkpointing": "full"}, "32": {"seq_len": 32}},
        seq_len=16,
        device="t4",
    )
    for given, expected in zip(data["variants"], api.variants, strict=True):
        report = expected.report
        figures = (report.peak_bytes, report.reserved_bytes, report.device_bytes, report.fits)
        assert tuple(given["report"][key] for key in ("peak_bytes", "reserved_bytes", "device_bytes", "fits")) == figures


def test_variants_file_names_the_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A TOML file's variants, a flags string or a table of flags without dashes, labelled by their names."""
    path = tmp_path / "variants.toml"
    path.write_text('plain = ""\n\n[checkpointed]\ncheckpointing = "full"\nexpandable-segments = true\nheadroom = 0.5\n')
    code, out, _ = run(capsys, "compare", "gpt2", "--seq-len", "16", "--device", "t4", "--variants", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert [v["label"] for v in data["variants"]] == ["plain", "checkpointed"] and data["traces"] == 1
    options = data["variants"][1]["report"]
    assert options["headroom"] == 0.5 and options["options"]["checkpointing"] == "full"
