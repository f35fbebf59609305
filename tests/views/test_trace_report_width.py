"""The trace report at 80 columns, for a few representative runs: every line fits, none ends in a space,
no figure is split from its unit, no note is left alone on a line, and the rows of a pipeline's two
text encoders stay apart."""

from __future__ import annotations

import re

import pytest

import vramsim
from vramsim.results.report import Report

WIDTH = 80
_UNIT_FIRST = re.compile(r"^\s*\(?-?(?:B|KiB|MiB|GiB|TiB)\b")
_NUMBER_LAST = re.compile(r"\d$")


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """gpt2 training as asked, with every checkpointing choice, and on too little memory (advice, allocator
    pressure); Llama-3.2-1B with LoRA and checkpointing; tensor parallel; an SDXL generation."""
    gpt2, every, tight = vramsim.simulate_each(
        "openai-community/gpt2", [{}, {"checkpointing": "all"}, {"headroom": 0.97}], seq_len=128
    )
    return {
        "gpt2": gpt2,
        "gpt2 --checkpointing all": every,
        "gpt2 on 3% of an H100": tight,
        "Llama-3.2-1B LoRA": vramsim.simulate("meta-llama/Llama-3.2-1B", lora=16, checkpointing="full", seq_len=64),
        "Llama-3.2-1B --tp 2": vramsim.simulate("meta-llama/Llama-3.2-1B", tp=2, gpus=2, seq_len=64),
        "SDXL generate": vramsim.simulate(
            "stabilityai/stable-diffusion-xl-base-1.0", task="generate", num_inference_steps=1, height=512, width=512
        ),
    }


@pytest.mark.parametrize("layers", ["fold", "all"])
def test_every_line_of_the_trace_report_reads_whole_at_80_columns(reports: dict[str, Report], layers: str) -> None:
    for name, report in reports.items():
        lines = vramsim.report_text(report, layers=layers, width=WIDTH).splitlines()
        for number, line in enumerate(lines):
            where = f"{name}, line {number}: {line!r}"
            assert len(line) <= WIDTH, where
            assert line == line.rstrip(), where
            assert not _UNIT_FIRST.match(line), where  # a unit torn from its number
            following = lines[number + 1] if number + 1 < len(lines) else ""
            assert not (_NUMBER_LAST.search(line) and _UNIT_FIRST.match(following)), where
            assert line.strip() not in ("(traced)", "(fits)", "(traced):"), where


def test_the_runs_show_what_they_are_chosen_for(reports: dict[str, Report]) -> None:
    """The fixture's runs do reach the lines this file checks: advice, a checkpointing table, a pipeline."""
    tight = vramsim.report_text(reports["gpt2 on 3% of an H100"], width=WIDTH)
    assert "DOES NOT FIT" in tight and "  try: --checkpointing" in tight
    assert "selective:\n" not in vramsim.report_text(reports["gpt2 --checkpointing all"], width=200)
    lora = vramsim.report_text(reports["Llama-3.2-1B LoRA"], width=WIDTH)
    assert "base_model.model" not in lora.split("Per layer")[0]  # the peak site as the model names it
    assert "in base_model.model" not in lora
    assert "per rank (" in vramsim.report_text(reports["Llama-3.2-1B --tp 2"], summary=True, width=200)


def test_a_pipelines_components_head_their_rows(reports: dict[str, Report]) -> None:
    """SDXL's text_encoder and text_encoder_2 rows, cut from the left, read alike; each component's rows
    come under its name."""
    table = vramsim.report_text(reports["SDXL generate"], width=WIDTH).split("Per layer")[1]
    names = [line.split("\u2502")[1].rstrip() for line in table.splitlines() if line.startswith("\u2502")]
    headings = [name.strip() for name in names if not name.startswith("   ")]
    assert headings == ["text_encoder", "text_encoder_2", "unet", "vae"]
    first, second = (names.index(" " + heading) for heading in ("text_encoder", "text_encoder_2"))
    assert first < second and all(name.startswith("   ") for name in names[first + 1 : second])


def test_a_choice_breaks_after_its_colon_not_inside_a_word(reports: dict[str, Report]) -> None:
    table = vramsim.report_text(reports["gpt2 --checkpointing all"], width=WIDTH).split("Activation checkpointing")[1]
    rows = [line.split("\u2502")[1].strip() for line in table.splitlines() if line.startswith("\u2502")]
    at = rows.index("selective:")
    assert rows[at + 1] == "torchtitan"  # two rows, each part whole (it was three, cut mid-word)
    assert "selective:torchtitan" in vramsim.report_text(reports["gpt2 --checkpointing all"], width=200)
