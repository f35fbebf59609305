"""Where in a gpt2 training step on an H100 does memory peak, drawn by PyTorch's own memory viewer?

vramsim replays the traced step through its model of the caching allocator and keeps every allocator
action (``memory_history=True``). Written as a ``torch.cuda.memory._snapshot()`` pickle, pytorch.org/memory_viz
draws it (the allocation timeline with the op, module and tensor behind each block, and the segments the
allocator would cache); written as a Chrome trace, Perfetto shows the ops inside their modules under
the allocated and reserved counters. Time is the order of events, not wall time (docs/exports.md).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import vramsim
from vramsim import format_bytes


def main() -> None:
    report = vramsim.simulate(
        "gpt2", task="train", device="h100-sxm", batch_size=1, seq_len=128, memory_history=True, advice="none"
    )
    assert report.memory_history is not None
    folder = Path(tempfile.mkdtemp(prefix="vramsim-exports-"))
    snapshot = vramsim.write_memory_viz(report.memory_history, folder / "snapshot.pickle")
    trace = vramsim.write_chrome_trace(report.memory_history, folder / "trace.json")
    history = report.memory_history
    print(
        f"gpt2 training step on an H100: peak allocated {format_bytes(report.peak_bytes)} at {report.peak_at.op} "
        f"in {report.peak_at.module} ({report.peak_at.phase}), reserved {format_bytes(report.reserved_bytes)}; "
        f"{len(history.actions):,} allocator actions, {len(history.segments)} segments cached at the end"
    )
    print(f"  {snapshot}: drop it on https://pytorch.org/memory_viz (or: python -m torch.cuda._memory_viz trace_plot {snapshot})")
    print(f"  {trace}: open it in https://ui.perfetto.dev or chrome://tracing")
    print(f"Answer: the snapshot is {snapshot} and the Chrome trace {trace}.")


if __name__ == "__main__":
    main()
