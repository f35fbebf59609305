"""The published-measurement benchmarks' case lists are well-formed (no simulation runs here: too slow for CI)."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path
from urllib.parse import urlparse

import pytest

from vramsim import model_zoo
from vramsim.config import SimulationConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from published_finetune import CASES as FINETUNE_CASES
from published_gpu import CASES, REPORT_FIELD, Case
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
    from vramsim.report import Report

    report_fields = {f.name for f in fields(Report)}
    assert set(REPORT_FIELD.values()) <= report_fields
