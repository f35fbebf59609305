"""Price sheets: the example reads, JSON reads the same, and a bad sheet is one line naming the entry and field."""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from vramsim.errors import ConfigError
from vramsim.pricing import Period, load_sheet

EXAMPLE = Path(__file__).parents[2] / "examples" / "prices.example.toml"

GOOD = """
currency = "USD"
[[offer]]
name = "box"
provider = "P"
gpu = "h100"
gpus_per_node = 8
nodes = 1
interconnect = "nvlink"
price = { hour = 2.49 }
"""


def _write(tmp_path: Path, text: str, name: str = "sheet.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_example_reads_and_says_its_numbers_are_made_up() -> None:
    sheet = load_sheet(EXAMPLE)
    assert [offer.device.name for offer in sheet.offers] == ["h100-sxm", "a100-80gb-pcie", "mi300x"]
    first = sheet.offers[0]
    assert first.prices[Period.WEEK] == Decimal("360.00") and first.minimum_hours == 24
    assert [option.name for option in first.options] == ["storage 2 TB", "setup"] and first.options[1].once == 50
    assert "MADE UP" in EXAMPLE.read_text()


def test_json_of_the_same_shape_reads_the_same(tmp_path: Path) -> None:
    """Prices are exact decimals either way: 2.49 is 2.49, not the float nearest it."""
    data = tomllib.loads(EXAMPLE.read_text())
    as_json = _write(tmp_path, json.dumps(data), "sheet.json")
    from_toml, from_json = load_sheet(EXAMPLE), load_sheet(as_json)
    assert [o.prices for o in from_json.offers] == [o.prices for o in from_toml.offers]
    assert load_sheet(_write(tmp_path, GOOD)).offers[0].prices == {Period.HOUR: Decimal("2.49")}


def test_a_custom_gpu_is_taken(tmp_path: Path) -> None:
    sheet = load_sheet(_write(tmp_path, GOOD.replace('"h100"', '"custom:96GiB:sm_90"')))
    assert sheet.offers[0].device.memory_bytes == 96 << 30 and sheet.offers[0].device.architecture == "hopper"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("hour = 2.49", "fortnight = 30"), "offer 'box': price: unknown period 'fortnight'; choose any of: hour, day, week"),
        (("hour = 2.49", "hour = -1"), "offer 'box': price.hour: a price is 0 or more; got -1"),
        (('"h100"', '"h1000"'), "offer 'box': gpu: unknown device 'h1000'"),
        (('gpu = "h100"', ""), "offer 'box': gpu: missing"),
        (("nodes = 1", "nodes = 1\ncolour = 'red'"), "offer 'box': unknown key 'colour'"),
        (('"nvlink"', '"ethernet"'), "offer 'box': interconnect: 'ethernet' is none of nvlink, pcie, infiniband"),
        (("nodes = 1", "nodes = 0"), "offer 'box': nodes: a whole number, 1 or more"),
        (('name = "box"', ""), r"offer #1: name: missing"),
        (('gpu = "h100"', 'gpu = "cpu"'), "offer 'box': gpu: the cpu is no GPU to rent"),
        (("nodes = 1", "nodes = 1\nminimum = { days = 0.5, years = 1 }"), "minimum: unknown unit 'years'"),
        (("nodes = 1", 'nodes = 1\noption = [{ name = "disk" }]'), "option 'disk': give either price"),
        (("nodes = 1", 'nodes = 1\noption = [{ name = "disk", price = { year = 1 } }]'), "option 'disk': price: unknown period"),
        (("nodes = 1", "nodes = 1\npeak_tflops = { int8 = 3 }"), "peak_tflops: unknown dtype 'int8'"),
    ],
)
def test_a_bad_sheet_is_one_line_naming_entry_and_field(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ConfigError, match=message) as error:
        load_sheet(path)
    assert "\n" not in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("broken.toml", GOOD + "[[offer]\n", "is not valid TOML"),
        ("sheet.yaml", GOOD, "a price sheet is a .toml or .json file"),
        ("empty.toml", 'currency = "USD"\n', "the sheet has no offers"),
        ("twice.toml", GOOD + GOOD.replace('currency = "USD"', ""), "offer 'box': name: another offer has the same name"),
        ("absent.toml", None, "cannot read the price sheet"),
    ],
)
def test_a_bad_file_is_one_line(tmp_path: Path, name: str, text: str | None, message: str) -> None:
    path = _write(tmp_path, text, name) if text is not None else tmp_path / name
    with pytest.raises(ConfigError, match=message) as error:
        load_sheet(path)
    assert "\n" not in str(error.value)
