"""``vramsim models`` and ``vramsim gpus``: what a simulation can name, listed without tracing anything."""

from __future__ import annotations

from rich.console import Console

from vramsim import model_zoo
from vramsim.cli.command import Command

__all__ = ["run"]


def _models() -> None:
    """The bundled model ids, then the bundled pipelines with the tasks each takes, an id first on each line."""
    for model_id in model_zoo.model_ids():
        print(model_id)
    from vramsim.workload.diffusion.recipes import RECIPES
    from vramsim.workload.diffusion.spec import find_pipeline

    pipelines = model_zoo.pipeline_ids()
    width = max(map(len, pipelines), default=0)
    print("diffusion pipelines, with the --task values each takes:")
    for pipeline_id in pipelines:
        spec = find_pipeline(pipeline_id)
        tasks = "generate, train" if spec is not None and spec.class_name in RECIPES else "generate"
        print(f"{pipeline_id.ljust(width)}  {tasks}")


def run(command: Command, console: Console) -> int:
    """``models``: the bundled configs; ``gpus``: the target devices."""
    if command.args.command == "models":
        _models()
    else:
        from vramsim.views.devices import render_devices

        render_devices(console)
    return 0
