"""A page to look at: the memory of a Llama-3.2-1B full fine-tune on an RTX 4090, as one HTML file.

bf16 weights, AdamW, one sequence of 1,024 tokens per step. The page draws the steady-state step's
memory event by event, stacked by category (weights, gradients, optimizer states, activations...),
with the forward, backward and optimizer phases shaded and the peak marked; then allocated, reserved
and what nvidia-smi would show against the card's usable memory, the breakdown at the peak and the
per-layer table. It opens in any browser with no network (plotly's script is inside the file).
``vramsim trace MODEL --html PATH`` writes the same page.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import vramsim
from vramsim import format_bytes, report_html


def main() -> None:
    path = Path(tempfile.gettempdir()) / "vramsim_llama_1b_4090.html"
    report = vramsim.simulate("meta-llama/Llama-3.2-1B", task="train", seq_len=1024, dtype="bf16", device="rtx-4090")
    path.write_text(report_html(report), encoding="utf-8")
    timeline = report.timeline
    assert timeline is not None  # simulate always sets it
    print(f"{len(timeline.points):,} points over {timeline.last_event - timeline.first_event + 1:,} events of the step")
    verdict = "fits" if report.fits else "does not fit"
    print(f"Answer: the report is at {path} (peak {format_bytes(report.peak_bytes)}, {verdict} on {report.target}).")


if __name__ == "__main__":
    main()
