"""The store gives back the record that was put, equal field for field, and never trusts a foreign entry."""

from __future__ import annotations

import dataclasses
import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
import transformers

import vramsim
from vramsim.cache import ResultCache
from vramsim.cache.records import Unencodable, from_data, to_data
from vramsim.cache.store import SCHEMA
from vramsim.errors import CacheWarning
from vramsim.results.report import Report

KEY = "ab" * 32


@pytest.fixture(scope="module")
def reports() -> list[Report]:
    """Reports with most optional parts filled: ranks, checkpointing choices, the allocator history, advice."""
    tiny = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=300, n_positions=128)
    sharded = vramsim.simulate_each(
        tiny,
        [{}, {"checkpointing": "all"}],
        cache=False,
        task="train",
        seq_len=32,
        device="h100",
        gpus=2,
        zero=3,
        memory_history=True,
    )
    crowded = vramsim.simulate(tiny, cache=False, task="train", batch_size=64, seq_len=128, device="h100", headroom=0.9999)
    generated = vramsim.simulate(tiny, cache=False, task="generate", seq_len=16, max_new_tokens=4, device="cpu")
    return [*sharded, crowded, generated]


def test_reports_read_back_equal(reports: list[Report]) -> None:
    """Through JSON text, as the store writes it: tuples, None, nested records and the timeline come back as they were."""
    assert reports[2].advice and reports[0].ranks is not None and reports[0].memory_history is not None
    for report in reports:
        assert from_data(json.loads(json.dumps(to_data(report, Report))), Report) == report


def test_the_store_gives_back_what_was_put(reports: list[Report], cache_home: Path) -> None:
    store = ResultCache.default()
    assert store is not None and store.root == cache_home / "vramsim"
    assert store.get(KEY, list[Report]) is None and store.answered == 0
    assert store.put(KEY, reports, list[Report])
    assert store.get(KEY, list[Report]) == reports and store.answered == 1


def test_a_value_the_hints_cannot_carry_is_not_stored(tmp_path: Path) -> None:
    """Under ``Any`` only JSON's own types read back exactly: a tuple there is refused, so nothing is written."""

    @dataclasses.dataclass(frozen=True)
    class Record:
        price: Decimal
        options: dict[str, Any]

    assert from_data(to_data(Record(price=Decimal("2.10"), options={}), Record), Record).price == Decimal("2.10")
    with pytest.raises(Unencodable):
        to_data(Record(price=Decimal(1), options={"max_memory": (1, 2)}), Record)
    store = ResultCache(tmp_path)
    assert not store.put(KEY, Record(price=Decimal(1), options={"max_memory": (1, 2)}), Record)
    assert not store.path(KEY).exists()


def test_a_literal_reads_back_as_one_of_its_values() -> None:
    """A ``Literal`` field (a serving report's cache layer kind) is stored as its value; a value outside it is not
    stored, and stored data outside it does not read back."""

    @dataclasses.dataclass(frozen=True)
    class Layer:
        kind: Literal["full", "sliding"]
        window: Literal[1, 2] | None

    layer = Layer(kind="sliding", window=None)
    assert from_data(json.loads(json.dumps(to_data(layer, Layer))), Layer) == layer
    with pytest.raises(Unencodable):
        to_data(Layer(kind="cross", window=None), Layer)  # type: ignore[arg-type]
    with pytest.raises(Unencodable):
        to_data(Layer(kind="full", window=True), Layer)  # type: ignore[arg-type]  # True == 1, yet not 1
    with pytest.raises(TypeError):
        from_data({"kind": "cross", "window": None}, Layer)


def _entry(**overrides: object) -> bytes:
    entry = {"schema": SCHEMA, "key": KEY, "kind": "vramsim.results.report.Report", "record": {}} | overrides
    return gzip.compress(json.dumps(entry).encode())


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"not gzip at all", "unreadable"),
        (gzip.compress(b"{not json"), "unreadable"),
        (_entry(schema=SCHEMA + 1), "another schema"),
        (_entry(key="cd" * 32), "another request"),
        (_entry(kind="vramsim.results.fit.LargestFit"), "another request"),
        (_entry(), "does not read back"),
    ],
    ids=["not gzip", "not json", "another schema", "another key", "another kind", "a record not read back"],
)
def test_a_foreign_entry_warns_and_answers_nothing(content: bytes, why: str, tmp_path: Path) -> None:
    store = ResultCache(tmp_path)
    store.path(KEY).parent.mkdir(parents=True)
    store.path(KEY).write_bytes(content)
    with pytest.warns(CacheWarning, match=f"ignored the result cache entry .*{why}"):
        assert store.get(KEY, Report) is None
    assert store.answered == 0


def test_a_cache_that_cannot_be_written_warns(reports: list[Report], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file where the folder would be")
    with pytest.warns(CacheWarning, match="cannot be written"):
        assert not ResultCache(tmp_path / "file").put(KEY, reports[0], Report)


def test_the_cache_home_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative XDG_CACHE_HOME is ignored, as the XDG spec says; VRAMSIM_NO_CACHE turns the default off."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")
    default = ResultCache.default()
    assert default is not None and default.root == Path.home() / ".cache" / "vramsim"
    monkeypatch.setenv("VRAMSIM_NO_CACHE", "1")
    assert ResultCache.default() is None
