"""Every architecture transformers ships for six heads traces a training step, on h100 or cpu in turn.

The mappings are transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``, ``..._MASKED_LM_...``,
``..._SEQ_TO_SEQ_CAUSAL_LM_...``, ``..._IMAGE_CLASSIFICATION_...``, ``..._SPEECH_SEQ_2_SEQ_...``
and ``..._CTC_...``. Each architecture is built from its default config
(``AutoConfig.for_model(model_type)``) and runs ``vramsim.simulate(task="train", steps=1)`` (forward,
backward, AdamW step) at a small sequence length, on h100 and cpu in turn through each mapping's sorted
architectures (each target on half of every mapping).

For CI speed the layer count is capped at 2 (``num_hidden_layers`` and its kin, keeping one
layer of each kind a hybrid model mixes): the layer count does not change which ops run.
``architectures.py`` states the few other adjustments (unset sizes filled, sub-configs picked).
The traces run in one worker process per core; every run of the suite traces all of them (about 2.5 minutes on
2 cores by itself), so a change to the tracer is checked against every architecture.

Each family of the bundled configs (model_zoo) is also traced from a bundled config of its own, capped the same
way: a training step and, where its head decodes, a generate step, on h100 (``architectures.bundled_cases``).

``KNOWN_FAILURES.md`` lists every architecture that does not trace, and why. The tests assert
that at least ``TARGET`` of each mapping traces, that every listed failure traced still fails (so the
list stays honest) and that nothing unlisted fails.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import architectures
import pytest

from vramsim.model_zoo.entries import model_entries

TARGET = 0.95
"""Share of each mapping that must trace."""
CASE_SECONDS = 180
"""A single trace taking longer than this counts as a failure (a hang)."""
KNOWN_FAILURES = Path(__file__).with_name("KNOWN_FAILURES.md")

Outcome = tuple[str, str, str, str, str | None, float]
"""``(mapping, model_type, class_name, target, error or None, seconds)``; a bundled family's row holds its
bundled id in place of the class name."""
BUNDLED_TASKS = {mapping: task for task, mapping in architectures.BUNDLED_MAPPINGS.items()}


def _timeout(*_: Any) -> None:
    raise TimeoutError(f"took more than {CASE_SECONDS} s")


def _worker_start() -> None:
    """Freeze what the worker has imported (torch, transformers, vramsim): Python's cyclic collector then
    stops rescanning those millions of objects on every full collection during the traces (about a fifth
    of the sweep's time); what the traces make is collected as usual. One intra-op thread, as the test
    processes beside it have (tests/conftest.py)."""
    import torch

    torch.set_num_threads(1)
    gc.collect()
    gc.freeze()


def trace_case(case: tuple[str, str, str, str]) -> Outcome:
    """Trace one architecture on its target (runs in a worker process)."""
    mapping, model_type, class_name, target = case
    signal.signal(signal.SIGALRM, _timeout)
    started = time.perf_counter()
    error = None
    signal.alarm(CASE_SECONDS)
    try:
        if mapping in BUNDLED_TASKS:
            architectures.trace_bundled(class_name, BUNDLED_TASKS[mapping])
        else:
            architectures.trace(model_type, class_name, target, mapping)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    finally:
        signal.alarm(0)
    return mapping, model_type, class_name, target, error, time.perf_counter() - started


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    cases = architectures.cases() + architectures.bundled_cases()
    workers = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 4))
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start) as pool:
        results = list(pool.map(trace_case, cases, chunksize=1))
    elapsed = time.perf_counter() - started
    print(
        f"\n{len(cases)} cases traced (each architecture on one of {', '.join(architectures.TARGETS)}, each bundled "
        f"family's train and generate on {architectures.BUNDLED_TARGET}) in {elapsed:.0f} s on {workers} workers"
    )
    for mapping in BUNDLED_TASKS:
        rows = [r for r in results if r[0] == mapping]
        print(
            f"  {mapping:22s} {architectures.BUNDLED_TARGET:5s} {sum(r[4] is None for r in rows):4d} / {len(rows)}  "
            f"{sum(r[5] for r in rows):.0f} s of traces"
        )
    for mapping in architectures.MAPPINGS:
        for target in architectures.TARGETS:
            rows = [r for r in results if r[0] == mapping and r[3] == target]
            print(f"  {mapping:22s} {target:5s} {sum(r[4] is None for r in rows):4d} / {len(rows)}")
    return results


def known_failures() -> dict[tuple[str, str], tuple[set[str], str]]:
    """``(mapping, model_type) -> (targets, reason)`` from the table in KNOWN_FAILURES.md."""
    listed: dict[tuple[str, str], tuple[set[str], str]] = {}
    for line in KNOWN_FAILURES.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or (cells[0] not in architectures.MAPPINGS and cells[0] not in BUNDLED_TASKS):
            continue
        mapping, model_type, targets, reason = cells
        listed[(mapping, model_type.strip("`"))] = ({t.strip() for t in re.split(r"[, ]+", targets) if t.strip()}, reason)
    return listed


BELOW_TARGET = {}
"""Mappings under ``TARGET`` today, and why (details in KNOWN_FAILURES.md). Strict: once one
reaches the target its entry must go."""


@pytest.mark.parametrize(
    "mapping",
    [
        pytest.param(m, marks=pytest.mark.xfail(reason=BELOW_TARGET[m], strict=True)) if m in BELOW_TARGET else m
        for m in architectures.MAPPINGS
    ],
)
def test_mapping_traces(mapping: str, outcomes: list[Outcome]) -> None:
    """The share of each mapping that traces; every failure is checked against KNOWN_FAILURES.md both ways
    by the two tests below."""
    rows = [r for r in outcomes if r[0] == mapping]
    traced = sum(r[4] is None for r in rows)
    failed = sorted(f"{r[1]} on {r[3]}" for r in rows if r[4] is not None)
    assert {r[3] for r in rows} == set(architectures.TARGETS), f"{mapping}: every target takes its share"
    assert traced / len(rows) >= TARGET, f"{mapping}: {traced}/{len(rows)} trace; failing: {failed}"


def test_listed_failures_still_fail(outcomes: list[Outcome]) -> None:
    by_case = {(r[0], r[1], r[3]): r[4] for r in outcomes}
    now_tracing = [
        f"{mapping} {model_type} on {target}"
        for (mapping, model_type), (targets, _) in known_failures().items()
        for target in targets
        if by_case.get((mapping, model_type, target), "missing") is None
    ]
    assert not now_tracing, f"these trace now; remove them from KNOWN_FAILURES.md: {now_tracing}"


def test_every_failure_is_listed(outcomes: list[Outcome]) -> None:
    listed = known_failures()
    unlisted = [
        f"{r[0]} {r[1]} on {r[3]}: {r[4]}"
        for r in outcomes
        if r[4] is not None and r[3] not in listed.get((r[0], r[1]), (set(), ""))[0]
    ]
    assert not unlisted, "failures missing from KNOWN_FAILURES.md:\n" + "\n".join(unlisted)


def test_each_bundled_family_traces_train_and_generate_on_h100(outcomes: list[Outcome]) -> None:
    """Every family of the bundled configs has its rows (generate where its head decodes); every failure among
    them is listed in KNOWN_FAILURES.md (checked both ways by the two tests above)."""
    rows = {(r[0], r[1]) for r in outcomes if r[0] in BUNDLED_TASKS}
    families = {entry.family for entry in model_entries()}
    assert {family for mapping, family in rows if mapping == "bundled-train"} == families
    generating = {entry.family for entry in model_entries() if entry.generates}
    assert {family for mapping, family in rows if mapping == "bundled-generate"} == generating


def test_failures_have_reasons() -> None:
    for (mapping, model_type), (targets, reason) in known_failures().items():
        assert targets <= set(architectures.TARGETS), f"{mapping} {model_type}: unknown targets {targets}"
        assert len(reason) > 10, f"{mapping} {model_type}: give the reason"
