"""The tracing stack imported once, before a command's work, out of the cyclic collector's way."""

from __future__ import annotations

import gc

__all__ = ["import_tracing_stack"]


def import_tracing_stack() -> None:
    """Import what every tracing command runs on (torch, transformers, vramsim's analysis) with the cyclic
    collector paused, then freeze it. Its million objects live to the end of the process, yet every full
    collection would rescan them: in the README's first command, collections took about a fifth of the CPU
    time. Frozen objects are still freed by their reference counts; only their rescans stop. Done once per
    process: a later call (a test running commands in one process) would freeze the garbage other runs left."""
    if gc.get_freeze_count():
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        import vramsim.api  # noqa: F401  (torch, transformers and vramsim's analysis with it)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
