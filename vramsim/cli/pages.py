"""``--html PATH`` (a result as one self-contained page) and ``--timeline`` (the timeline in ``--json``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vramsim.errors import ConfigError

__all__ = ["add_page_arguments", "check_page_arguments", "write_page"]


def add_page_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``--html`` on every command with a result to draw (``compare``: the variants' timelines overlaid);
    ``--timeline`` on ``trace``, whose report holds one."""
    parser.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help="also write the result as one self-contained HTML page (plots and tables; opens with no network)",
    )
    if command == "trace":
        parser.add_argument(
            "--timeline",
            action="store_true",
            help="with --json: include the memory timeline of the steady-state step (sampled points, phases)",
        )


def check_page_arguments(args: argparse.Namespace) -> None:
    """Refused before anything is traced: ``--timeline`` without ``--json``, a page in a folder that does not exist."""
    if getattr(args, "timeline", False) and not args.json:
        raise ConfigError("--timeline adds the timeline to --json's output; give --json too (--html draws it anyway)")
    path = getattr(args, "html", None)
    if path is not None and not Path(path).resolve().parent.is_dir():
        raise ConfigError(
            f"--html {path}: the folder {Path(path).resolve().parent} does not exist; create it or choose another path"
        )


def write_page(path: str, text: str) -> None:
    """Write the page and say where it is (on stderr: stdout may be ``--json``)."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--html {path}: cannot write it ({exc.strerror})") from None
    print(f"vramsim: wrote {path}", file=sys.stderr)
