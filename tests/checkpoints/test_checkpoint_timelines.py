"""A checkpoint's save and restore as timelines: each peak is the report's own figure; ``--json`` leaves them out."""

from __future__ import annotations

import vramsim


def test_save_and_restore_timelines_peak_at_the_reported_figures() -> None:
    report = vramsim.checkpoint("gpt2", seq_len=16, device="h100")
    for timeline, peak in ((report.save_timeline, report.save_peak_bytes), (report.restore_timeline, report.restore_peak_bytes)):
        assert timeline is not None
        marked = next(p for p in timeline.points if p.event == timeline.peak_event)
        assert marked.allocated_bytes == peak == max(p.allocated_bytes for p in timeline.points)
        assert {span.phase for span in timeline.phases} <= {"save", "restore", "forward", "backward", "optimizer"}
    assert report.restore_timeline is not None and any(s.phase == "restore" for s in report.restore_timeline.phases)
    data = report.to_dict()
    assert "save_timeline" not in data and "restore_timeline" not in data
