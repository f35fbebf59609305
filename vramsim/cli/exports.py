"""``--memory-viz`` and ``--chrome-trace``: the files written from a report's allocator history."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vramsim.errors import ConfigError

if TYPE_CHECKING:
    from vramsim.results.report import Report

__all__ = ["export_paths", "write_exports"]

_OPEN_WITH = {
    "memory_viz": "drop it on https://pytorch.org/memory_viz, or python -m torch.cuda._memory_viz trace_plot PATH -o out.html",
    "chrome_trace": "open it in https://ui.perfetto.dev or chrome://tracing",
}


def export_paths(args: argparse.Namespace) -> dict[str, Path]:
    """The export files asked for, by flag, checked before the trace runs: each one's folder must exist."""
    paths = {name: Path(getattr(args, name)) for name in _OPEN_WITH if getattr(args, name, None)}
    for name, path in paths.items():
        if not path.parent.is_dir():
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} {path}: the folder {path.parent} does not exist; create it or choose another path")
    return paths


def write_exports(report: Report, paths: dict[str, Path]) -> None:
    """Write each asked-for file from ``report.memory_history`` and say on stderr where it is and how to open it."""
    if not paths:
        return
    from vramsim.views.chrome_trace import write_chrome_trace
    from vramsim.views.memory_viz import write_memory_viz

    history = report.memory_history
    assert history is not None, "memory_history=True was asked for"
    writers = {"memory_viz": write_memory_viz, "chrome_trace": write_chrome_trace}
    for name, path in paths.items():
        written = writers[name](history, path)
        print(f"vramsim: wrote {written} ({_OPEN_WITH[name].replace('PATH', str(written))})", file=sys.stderr)
