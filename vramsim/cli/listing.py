"""``vramsim models`` and ``vramsim gpus``: what a simulation can name, listed without tracing anything."""

from __future__ import annotations

import argparse

from rich.console import Console

from vramsim import model_zoo

__all__ = ["run"]


def _models() -> None:
    """The bundled model ids, then the bundled pipelines with the tasks each takes."""
    for model_id in model_zoo.model_ids():
        print(model_id)
    from vramsim.workload.diffusion.recipes import RECIPES
    from vramsim.workload.diffusion.spec import find_pipeline

    for pipeline_id in model_zoo.pipeline_ids():
        spec = find_pipeline(pipeline_id)
        tasks = "generate or train" if spec is not None and spec.class_name in RECIPES else "generate"
        print(f"{pipeline_id}  (diffusion pipeline: --task {tasks})")


def run(args: argparse.Namespace, console: Console) -> int:
    """``models``: the bundled configs; ``gpus``: the target devices."""
    if args.command == "models":
        _models()
    else:
        from vramsim.views.devices import render_devices

        render_devices(console)
    return 0
