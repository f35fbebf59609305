"""``report.timeline``: the steady-state step sampled, its peaks exact, its categories the breakdown's."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from vramsim import Report, simulate
from vramsim.analysis import timeline as timeline_module
from vramsim.estimators.assumptions import overheads_for, totals
from vramsim.estimators.devices import get_device


@pytest.fixture(scope="module")
def gpt2_step() -> Report:
    """One real training step of gpt2 on an H100 (1,652 events in the step: fewer than the points kept)."""
    return simulate("gpt2", seq_len=64, device="h100", advice="graph")


def test_peaks_are_the_reports(gpt2_step: Report) -> None:
    """The highest allocated point is ``peak_bytes`` at its event; the highest reserved plus the reserved-only
    overheads (``device_memory`` adds them to the allocator's) is ``reserved_bytes``."""
    timeline = gpt2_step.timeline
    assert timeline is not None and gpt2_step.allocator_pressure is None
    added = totals(overheads_for(get_device("h100"), world_size=1, training=True, module_loading="lazy"))
    assert timeline.reserved_overhead_bytes == added.reserved - added.allocated
    assert max(p.allocated_bytes for p in timeline.points) == gpt2_step.peak_bytes == 2_372_849_664
    peak = next(p for p in timeline.points if p.event == timeline.peak_event)
    assert peak.allocated_bytes == gpt2_step.peak_bytes
    assert max(p.reserved_bytes for p in timeline.points) + timeline.reserved_overhead_bytes == gpt2_step.reserved_bytes
    device = max(p.reserved_bytes for p in timeline.points) + timeline.reserved_overhead_bytes + timeline.device_overhead_bytes
    assert device == gpt2_step.device_bytes
    assert timeline.usable_bytes == int(gpt2_step.capacity_bytes * (1 - gpt2_step.headroom))


def test_categories_are_the_breakdowns(gpt2_step: Report) -> None:
    """Each point's categories sum to its allocated bytes; at the peak they are ``breakdown`` itself."""
    timeline = gpt2_step.timeline
    assert all(sum(p.categories.values()) == p.allocated_bytes for p in timeline.points)
    peak = next(p for p in timeline.points if p.event == timeline.peak_event)
    assert peak.categories == gpt2_step.breakdown
    assert (peak.op, peak.module, peak.phase) == (gpt2_step.peak_at.op, gpt2_step.peak_at.module, gpt2_step.peak_at.phase)


def test_points_say_what_ran(gpt2_step: Report) -> None:
    """Every event of the short step is a point, each with its traced tensor; the phases run forward, backward,
    optimizer and tile the step."""
    timeline = gpt2_step.timeline
    assert len(timeline.points) == timeline.last_event - timeline.first_event + 1 == 1652
    assert all(p.shape is not None and p.dtype is not None for p in timeline.points)
    first = timeline.points[0]
    assert (first.op, first.module, first.shape, first.dtype) == ("aten.embedding", "transformer.wte", (1, 64, 768), "float32")
    assert [span.phase for span in timeline.phases] == ["forward", "backward", "optimizer"]
    assert timeline.phases[0].first_event == timeline.first_event and timeline.phases[-1].last_event == timeline.last_event
    assert all(a.last_event + 1 == b.first_event for a, b in pairwise(timeline.phases))


def test_decimation_keeps_the_count_and_the_peaks(monkeypatch: pytest.MonkeyPatch, gpt2_step: Report) -> None:
    """With room for 60 points the 1,652 events are sampled to at most 60, the peaks among them exactly."""
    monkeypatch.setattr(timeline_module, "TIMELINE_POINTS", 60)
    report = simulate("gpt2", seq_len=64, device="h100", advice="graph")
    timeline = report.timeline
    assert 40 <= len(timeline.points) <= 60
    assert max(p.allocated_bytes for p in timeline.points) == report.peak_bytes == gpt2_step.peak_bytes
    assert max(p.reserved_bytes for p in timeline.points) == max(p.reserved_bytes for p in gpt2_step.timeline.points)
    assert [p.event for p in timeline.points] == sorted({p.event for p in timeline.points})
    assert {timeline.first_event, timeline.last_event, timeline.peak_event, timeline.reserved_peak_event} <= {
        p.event for p in timeline.points
    }


def test_a_pipelines_phases_are_its_components() -> None:
    """A diffusion pipeline's step is shaded by component phase (the text encoders', the denoiser's, the VAE's)."""
    pipeline = str(Path(__file__).parents[1] / "ground_truth" / "pipelines" / "tiny-sdxl")
    report = simulate(pipeline, task="generate", height=32, width=32, num_inference_steps=2, device="h100", advice="graph")
    timeline = report.timeline
    assert [span.phase for span in timeline.phases] == ["encode_prompt", "denoise", "decode"]
    assert max(p.allocated_bytes for p in timeline.points) == report.peak_bytes == max(c.peak_bytes for c in report.components)
