"""The published-measurement benchmarks' case lists are well-formed (no simulation runs here: too slow for CI)."""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import fields, replace
from pathlib import Path
from urllib.parse import urlparse

import pytest
import torch

from vramsim import model_zoo
from vramsim.config import SimulationConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from published_finetune import CASES as FINETUNE_CASES
from published_gpu import (
    CASES,
    NEOX_SDPA,
    REPORT_FIELD,
    Case,
    Row,
    ask,
    interpreters,
    same_release,
    table,
    trainer2022_adam8bit,
)
from published_multi_gpu import CASES as MULTI_GPU_CASES

ALL_CASES = [*CASES, *FINETUNE_CASES, *MULTI_GPU_CASES]


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.name for case in ALL_CASES])
def test_case_is_well_formed(case: Case) -> None:
    assert case.figure > 0
    url = urlparse(case.source)
    assert url.scheme == "https" and url.netloc, case.source
    assert case.quote.strip() and case.stack.strip()
    assert case.measured in REPORT_FIELD
    assert case.unavailable is not None or model_zoo.find(case.model) is not None, f"{case.model} is not bundled"
    known = {f.name for f in fields(SimulationConfig)}
    assert set(case.options) <= known, sorted(set(case.options) - known)
    assert "device" not in case.options, "the device is the case's own field"


def test_case_names_are_unique_and_there_are_at_least_25() -> None:
    names = [case.name for case in ALL_CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 25


def test_finetune_cases_ask_what_their_source_trained() -> None:
    """At least ten answerable fine-tuning figures: a full fine-tuning baseline and adapters (peft configs) beside it."""
    answerable = [case for case in FINETUNE_CASES if case.unavailable is None]
    assert len(answerable) >= 10
    assert any(case.options.get("lora") is None for case in answerable), "a full fine-tuning baseline"
    assert sum(case.options.get("lora") is not None for case in answerable) >= 8
    assert all(case.options["task"] == "train" for case in FINETUNE_CASES)


def test_every_report_field_exists() -> None:
    from vramsim.results.report import Report

    report_fields = {f.name for f in fields(Report)}
    assert set(REPORT_FIELD.values()) <= report_fields


def test_a_case_names_the_transformers_its_source_ran_where_it_matters() -> None:
    """The GPT-NeoX table's source (huggingface/transformers#31031) ran transformers 4.42, whose model code holds
    more than today's; a release is written major.minor, as ``--python transformers-X.Y=`` names it."""
    assert {case.transformers for case in NEOX_SDPA} == {"4.42"}
    for case in ALL_CASES:
        if case.transformers is not None:
            major, minor = case.transformers.split(".")
            assert major.isdigit() and minor.isdigit(), case.transformers


def test_a_release_matches_its_patch_versions_only() -> None:
    assert same_release("4.42", "4.42.4") and same_release("4.42", "4.42.0.dev0")
    assert not same_release("4.42", "4.4.2") and not same_release("4.42", "5.24.0") and not same_release("4.42", "4.420.0")


def test_interpreters_are_named_by_release() -> None:
    assert interpreters(["transformers-4.42=/venv/bin/python"]) == {"4.42": "/venv/bin/python"}
    for bad in ("4.42=/venv/bin/python", "transformers-4.42", "transformers-4.42="):
        with pytest.raises(ValueError, match=r"transformers-MAJOR\.MINOR"):
            interpreters([bad])


def test_a_case_is_asked_in_the_interpreter_of_its_release(tmp_path: Path) -> None:
    """A stand-in interpreter that records its arguments and answers as the benchmark's ``--case`` does."""
    case = replace(NEOX_SDPA[0], transformers="0.1")  # a release no interpreter running this test has
    called = tmp_path / "called"
    answer = json.dumps(dict(predicted=123, refused=None, seconds=1.5, traced_with="0.1.7"))
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho \"$@\" > {called}\necho 'a log line'\necho '{answer}'\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    row = ask(case, {"0.1": str(python)}, "bench.py")
    assert called.read_text().split() == ["bench.py", "--case", *case.name.split()]
    assert (row.predicted, row.refused, row.traced_with, row.off_stack) == (123, None, "0.1.7", False)
    python.write_text("#!/bin/sh\necho 'Traceback: boom' >&2\nexit 1\n")
    failed = ask(case, {"0.1": str(python)}, "bench.py")
    assert failed.predicted is None and failed.refused is not None and "boom" in failed.refused


def test_a_row_answered_by_another_transformers_says_so() -> None:
    case = NEOX_SDPA[0]
    other, own = Row(case, predicted=case.figure, traced_with="5.24.0"), Row(case, predicted=case.figure, traced_with="4.42.4")
    lines = table([other, own]).splitlines()
    assert "(transformers 5.24.0, not the case's 4.42)" in lines[2]
    assert "(transformers 4.42.4) |" in lines[3]
    assert lines[-1].endswith("2 of 2 within 10%. 1 asked on a transformers other than their case's.")


def test_the_pages_8bit_adam_keeps_gradients_zeroed_in_place() -> None:
    """The 2022 Trainer's ``model.zero_grad()`` (torch 1.10: ``set_to_none=False``) applies to the page's
    ``bnb.optim.Adam8bit`` too: the loop's ``zero_grad(set_to_none=True)`` must leave the gradients allocated."""
    weight = torch.nn.Parameter(torch.ones(8))
    weight.grad = torch.ones(8)
    optimizer = trainer2022_adam8bit([weight])
    assert type(optimizer).__name__ == "Adam8bit" and optimizer.args.optim_bits == 8
    optimizer.zero_grad(set_to_none=True)
    assert weight.grad is not None and not weight.grad.any()
