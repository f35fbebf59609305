"""``vramsim.sweep``: every point, derived or traced, equals its own full trace to the byte."""

from collections import Counter
from collections.abc import Callable

import pytest
import transformers

import vramsim
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.results.sweep import SweepPoint
from vramsim.search.sweep import _Derived, _DeviceGrid, _Pending, _Run
from vramsim.search.sweep_sizes import SizeFit, quantities, structure
from vramsim.search.sweep_workers import TraceTask, trace_records


@pytest.mark.parametrize("choices", ["none,full", "selective,every:2"])
def test_every_point_equals_its_own_trace(
    tiny_llama: transformers.LlamaConfig, choices: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small model's grid: the points derived from the proven boxes and the traced ones alike are what
    ``simulate`` reports at each, peak, reserved, device and verdict, under two checkpointing choices (the
    points after a structure's first are its what-if timeline replayed with their own sizes, for every choice
    that path takes)."""
    replayed: Counter[str] = Counter()
    replay = _DeviceGrid._replayed

    def counted(grid: _DeviceGrid, pending: list[_Pending], answered: Callable[[int], None]) -> list[SweepPoint]:
        replayed.update(row.row.spec for row in pending)
        return replay(grid, pending, answered)

    monkeypatch.setattr(_DeviceGrid, "_replayed", counted)
    found = vramsim.sweep(tiny_llama, batch_size="1:3", seq_len="16:128:16", device="h100", checkpointing=choices, jobs=1)
    assert set(replayed) == set(choices.split(",")) and min(replayed.values()) >= 12, replayed
    assert len(found.points) == 3 * 8 * 2
    derived = [p for p in found.points if p.answer == "derived"]
    assert len(derived) >= 12 and found.traces < 24  # batch 1 is its own structure; 2-3 are proven and derived
    for point in found.points:
        report = vramsim.simulate(
            tiny_llama,
            batch_size=point.batch_size,
            seq_len=point.seq_len,
            device="h100",
            checkpointing=point.checkpointing,
            advice="none",
        )
        assert (point.peak_bytes, point.reserved_bytes, point.device_bytes, point.fits) == (
            report.peak_bytes,
            report.reserved_bytes,
            report.device_bytes,
            report.fits,
        ), point
    assert {(p.checkpointing, p.batch_size, p.seq_len) for p in found.largest} == {(c, 3, 128) for c in choices.split(",")}


def test_every_derived_point_has_its_own_traces_sizes(tiny_llama: transformers.LlamaConfig) -> None:
    """A grid across three structures (batch 1's masks; above 3,072 tokens the embedding's backward takes a
    workspace, on batch 16 at the longest lengths): every derived point's sizes are its own trace's, every one to
    the byte, and its structure is the one its fit was proven for; a fit proven once answers other boxes."""
    axes = {"batch_size": (1, 4, 8, 12, 16), "seq_len": (64, 112, 160, 208, 256), "device": ("h100",)}
    options = {"task": "train", "device": "h100"}
    grid = _DeviceGrid(
        tiny_llama, options, axes | {"checkpointing": ("none",), "gpus": (1,)}, _Run("local", None, 1, lambda *told: None)
    )
    answers = grid._prove_all()
    own = {p: trace_records(TraceTask(tiny_llama, options | {"batch_size": p[0], "seq_len": p[1]})) for p in answers}
    assert len({structure(trace) for trace in own.values()}) == 3
    derived = {point: answer for point, answer in answers.items() if isinstance(answer, _Derived)}
    assert len(derived) >= 5 and grid.traces == len(answers) - len(derived)
    for point, answer in derived.items():
        proven = next(shape for shape, fit in grid._proven if fit is answer)
        assert structure(own[point]) == proven and answer.fit.evaluate(*point) == quantities(own[point]), point


def test_a_fit_is_checked_to_the_byte(tiny_llama: transformers.LlamaConfig) -> None:
    """The polynomials through a 2 x 3 grid of traces give a further trace's every size; a grid without the
    sequence's square (2 x 2) does not (attention's FLOPs grow with it), so that box would be traced."""
    traced = {
        (b, s): trace_records(TraceTask(tiny_llama, {"task": "train", "batch_size": b, "seq_len": s, "device": "h100"}))
        for b, s in [(2, 16), (2, 64), (2, 128), (4, 16), (4, 64), (4, 128), (3, 96)]
    }
    assert len({structure(trace) for trace in traced.values()}) == 1
    sizes = {point: quantities(trace) for point, trace in traced.items()}
    assert SizeFit((2, 4), (16, 64, 128), sizes).predicts(3, 96, sizes[3, 96])
    assert not SizeFit((2, 4), (16, 128), sizes).predicts(3, 96, sizes[3, 96])


def test_what_a_sweep_refuses(tiny_llama: transformers.LlamaConfig) -> None:
    with pytest.raises(ConfigError, match="'all' is a table of its own"):
        vramsim.sweep(tiny_llama, checkpointing="none,all", jobs=1)
    with pytest.raises(UnsupportedError, match="task='generate'"):
        vramsim.sweep(tiny_llama, task="generate", jobs=1)
    with pytest.raises(ConfigError, match="'x' is not a whole number"):
        vramsim.sweep(tiny_llama, seq_len="16,x", jobs=1)


def test_replays_in_processes_give_this_process_answers(tiny_llama: transformers.LlamaConfig) -> None:
    """The derived points replayed in two local processes (``sweep_answers``) are the points replayed in this one,
    to the byte."""
    axes = {"batch_size": "2:3", "seq_len": "16:128:16", "device": "h100", "checkpointing": "none,full", "cache": False}
    spread = vramsim.sweep(tiny_llama, jobs=2, **axes)
    here = vramsim.sweep(tiny_llama, jobs=1, **axes)
    assert spread.points == here.points and sum(point.answer == "derived" for point in spread.points) >= 16
