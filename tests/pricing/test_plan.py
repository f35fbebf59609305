"""``vramsim.plan`` over a hand-checked three-offer sheet: the rows ranked by total, each row's setting the figure a
trace of it gives, the totals as billed by hand, offers of one GPU model sharing their traces, the duration from
the traced FLOPs of the row's setting, and the key."""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import transformers
from cli_runs import SearchedProgram, searched_programs
from tiny_models import tiny_llama_config

import vramsim
from vramsim.analysis.traced import build_and_trace
from vramsim.api import plan
from vramsim.config import SimulationConfig
from vramsim.estimators.assumptions import MODEL_FLOPS_UTILISATION
from vramsim.pricing import load_sheet, parse_sheet, step_flops
from vramsim.pricing.key import plan_key
from vramsim.results.plan import Plan
from vramsim.tracer.graph import build_graph
from vramsim.workload.targets import resolve_target

JOB = {"task": "train", "seq_len": 64}
"""A two-layer Llama's training step: about 598 MB on one GPU, 592 MB of it the CUDA context and workspaces."""

SHEET = """
currency = "USD"

[[offer]]
name = "a100-pair"
provider = "Cloud A"
gpu = "a100-80gb-pcie"
gpus_per_node = 2
nodes = 1
interconnect = "pcie"
price = { hour = 2.00, day = 40.00 }

[[offer.option]]
name = "setup"
once = 5.00

[[offer]]
name = "a100-quad"
provider = "Cloud B"
gpu = "a100-80gb-pcie"
gpus_per_node = 4
nodes = 1
interconnect = "nvlink"
minimum = { days = 2 }
price = { hour = 1.50 }

[[offer]]
name = "small"
provider = "Cloud C"
gpu = "custom:700MiB:sm_86"
gpus_per_node = 2
nodes = 1
interconnect = "pcie"
price = { day = 5.00 }
peak_tflops = { float32 = 20 }
"""
"""Hand-checked for one day: small x1 is 1 day x 5.00; a100-pair x1 one day (40.00, not 24 hours at 48.00) plus the
one-off setup 5.00, x2 85.00; a100-quad is billed its 2-day minimum, 48 hours x 1.50 = 72.00 a GPU. small x2 does
not fit: two ranks add NCCL's buffers (906 MB) to 700 MiB less the 10% headroom (630 MiB)."""

EXPECTED = [
    ("small", 1, "5.00"),
    ("a100-pair", 1, "45.00"),
    ("a100-quad", 1, "72.00"),
    ("a100-pair", 2, "85.00"),
    ("a100-quad", 2, "144.00"),
    ("a100-quad", 4, "288.00"),
]


def _sheet(tmp_path: Path, text: str = SHEET, name: str = "prices.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@cache
def _planned() -> tuple[Plan, list[SearchedProgram]]:
    """The plan for one day over ``SHEET``, and every program the search traced."""
    with pytest.MonkeyPatch.context() as patch:
        traced = searched_programs(patch)
        found = plan(tiny_llama_config(), prices=parse_sheet(_toml(SHEET), "sheet.toml"), days=1, **JOB)
    return found, traced


def _toml(text: str) -> dict[str, Any]:
    import tomllib

    return tomllib.loads(text, parse_float=Decimal)


def test_rows_are_ranked_and_billed_as_by_hand() -> None:
    """Every offer and GPU count that fits, cheapest first, each total as billed by hand; small x2 fits nowhere."""
    found, _ = _planned()
    assert [(r.quote.offer, r.quote.gpus, str(r.quote.total)) for r in found.rows] == EXPECTED
    assert found.unfit == [] and found.advice == [] and found.cheapest is found.rows[0]
    assert all(r.setting.device_bytes <= r.usable_bytes < r.capacity_bytes for r in found.rows)
    assert found.rows[2].quote.billed_hours == 48  # the minimum commitment


def test_offers_of_one_gpu_model_share_their_traces() -> None:
    """The two A100 offers share one search: each program is traced once for both (a refused one is no trace)."""
    found, traced = _planned()
    assert len(traced) == len(set(traced)) >= found.traces
    assert traced.count(SearchedProgram("a100-80gb-pcie", 1, 1, 1)) == 1


@pytest.mark.parametrize("index", [0, 3])
def test_each_rows_setting_is_what_a_trace_of_it_gives(index: int) -> None:
    """The row's per-GPU figure is ``simulate``'s for that setting on that GPU, and fits under the headroom."""
    row = _planned()[0].rows[index]
    device = {"small": "custom:700MiB:sm_86"}.get(row.quote.offer, "a100-80gb-pcie")
    report = vramsim.simulate(tiny_llama_config(), device=device, advice="none", **JOB, **row.setting.options())
    assert report.device_bytes == row.setting.device_bytes <= row.usable_bytes
    assert report.fits


def test_a_duration_from_tokens_is_the_rows_traced_flops_over_the_peak() -> None:
    """--tokens: the row's step FLOPs are those of a trace of its setting's program; steps x FLOPs over one GPU's
    20 TFLOPS (the sheet's) x the stated utilisation is the duration, billed in started days."""
    head, *offers = SHEET.split("[[offer]]")
    small = f"{head}[[offer]]{offers[2]}"
    found = plan(tiny_llama_config(), prices=parse_sheet(_toml(small), "small.toml"), tokens=10**12, **JOB)
    (row,) = found.rows
    config = SimulationConfig(**JOB, device="custom:700MiB:sm_86")
    _, _, trace = build_and_trace(tiny_llama_config(), config, resolve_target(config.device), checkpointing="marked")
    step = step_flops(build_graph(trace), 64)
    training = row.quote.duration.training
    assert training is not None and training.step == step and training.steps == 10**12 // 64
    assert row.quote.duration.seconds == pytest.approx(training.steps * step.total / (20e12 * MODEL_FLOPS_UTILISATION))
    days = -(-row.quote.billed_hours // 24)
    assert row.quote.total == days * Decimal("5.00")


def test_the_key_is_the_requests(tmp_path: Path) -> None:
    """The same request, however the sheet is written, gives the same key; any change of model, option, sheet or
    duration a new one. Each row's order key differs from every other's."""
    found, _ = _planned()
    llama = tiny_llama_config()
    sheet = load_sheet(_sheet(tmp_path))
    duration = {"tokens": None, "days": 1, "hours": None, "mfu": None, "max_gpus": None, "stop_after_hours": None}
    key = plan_key(llama, JOB, sheet, duration)
    assert found.key == key and len(key) == 64 and int(key, 16) >= 0
    shuffled = SHEET.replace("price = { hour = 2.00, day = 40.00 }", "price = {day=40.0,hour=2}").replace(
        "minimum = { days = 2 }", "minimum = { hours = 48 }  # the same"
    )
    same = load_sheet(_sheet(tmp_path, shuffled, "other.toml"))
    assert plan_key(llama, {**JOB, "batch_size": 1}, same, duration) == key  # batch 1 is the default
    changed = [
        plan_key(llama, JOB, load_sheet(_sheet(tmp_path, SHEET.replace("day = 5.00", "day = 5.01"), "c.toml")), duration),
        plan_key(llama, {**JOB, "seq_len": 128}, sheet, duration),
        plan_key(llama, JOB, sheet, {**duration, "days": 2}),
        plan_key(llama, JOB, sheet, {**duration, "stop_after_hours": 12.0}),
        plan_key(transformers.LlamaConfig(**{**llama.to_dict(), "num_hidden_layers": 3}), JOB, sheet, duration),
    ]
    assert len({key, *changed}) == 6
    assert len({row.quote.key for row in found.rows}) == len(found.rows)
