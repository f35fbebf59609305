"""Long lines cut between words, never between a figure and its unit or before a short note."""

from __future__ import annotations

from rich.text import Text

from vramsim.views.lines import wrap
from vramsim.views.units import format_bytes


def test_a_figure_stays_with_its_unit() -> None:
    """The advice line that used to end at ``(-12.58`` and start the next line with ``GiB)``."""
    line = "  try: --checkpointing selective:torchtitan: 58.69 GiB on the device (-12.58 GiB) (fits)"
    lines = [each.plain for each in wrap(line, 70, indent=4)]
    assert lines == ["  try: --checkpointing selective:torchtitan: 58.69 GiB on the device", "    (-12.58 GiB) (fits)"]
    for width in range(30, 90):
        for each in wrap(line, width, indent=4):
            assert len(each.plain) <= width and each.plain == each.plain.rstrip()
            assert not each.plain.lstrip().startswith(("GiB", "(fits)")), (width, each.plain)


def test_a_note_stays_with_its_word() -> None:
    """No line holds a lone ``(traced)``: it goes with the value before it."""
    lines = [each.plain for each in wrap("  try: --dtype bf16 (traced): 12.00 GiB on the device", 20)]
    assert lines == ["  try: --dtype", "  bf16 (traced):", "  12.00 GiB on the", "  device"]


def test_styles_survive_the_cut() -> None:
    text = Text.assemble(("FITS", "bold green"), " on h100: 3.53 GiB of 71.27 GiB usable (10% headroom)")
    first, second = wrap(text, 40)
    assert first.plain.startswith("FITS") and first.spans[0].style == "bold green"
    assert second.plain == "  usable (10% headroom)"


def test_the_unit_keeps_the_number_under_1000() -> None:
    """1,000-1,023 of a unit read as the next one: 1002 MiB is 0.98 GiB."""
    assert format_bytes(1002 * 2**20) == "0.98 GiB"
    assert format_bytes(999 * 2**20) == "999.00 MiB"
    assert format_bytes(1000) == "0.98 KiB"
    assert format_bytes(999) == "999 B"
    assert format_bytes(int(999.999 * 2**20)) == "0.98 GiB"  # rounds to 1000.00 MiB: the next unit


def test_a_word_wider_than_the_line_is_folded_and_the_words_after_it_follow() -> None:
    """A model path longer than 80 columns (a test's tmp folder, a deep checkpoint folder) is cut, as a terminal
    would, and the words after it continue its last line: no line is over the width."""
    path = "/tmp/pytest-of-root/pytest-106/popen-gw0/test_trace_folds_layers_and_lo0/config.json"
    lines = [line.plain for line in wrap(f"{path}  on one GPU (10% headroom), traced for h100-sxm", 80)]
    assert lines == [path[:78], f"  {path[78:]}  on one GPU (10% headroom), traced for h100-sxm"]
