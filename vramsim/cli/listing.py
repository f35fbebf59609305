"""``vramsim models`` and ``vramsim gpus``: what a simulation can name, listed without tracing anything."""

from __future__ import annotations

from rich.console import Console

from vramsim.cli.command import Command
from vramsim.errors import ConfigError
from vramsim.model_zoo.entries import model_entries, pipeline_entries
from vramsim.views.models import render_models

__all__ = ["run"]


def _models(pattern: str | None, console: Console) -> None:
    """The bundled models and pipelines whose ids match ``pattern``, read from the bundled files and the trained
    pipelines' table, without torch; none matching is an error naming what to do instead."""
    from vramsim.workload.diffusion.scripts import GENERATING, TRAINING_SCRIPTS  # here: other commands load none

    models = model_entries(pattern)
    pipelines = [(entry, _pipeline_tasks(entry.family, GENERATING, TRAINING_SCRIPTS)) for entry in pipeline_entries(pattern)]
    if not models and not pipelines:
        raise ConfigError(
            f"no bundled model or pipeline matches {pattern!r} (`vramsim models` lists them all); any other model "
            "runs from its Hugging Face id, or offline from a local config.json (its path or its folder)"
        )
    render_models(models, pipelines, console)


def _pipeline_tasks(class_name: str, generating: frozenset[str], training: dict[str, str]) -> str:
    """The ``--task`` values a pipeline class takes; one whose call is not run yet says so."""
    if class_name not in generating:
        return "none yet"
    return "generate, train" if class_name in training else "generate"


def run(command: Command, console: Console) -> int:
    """``models``: the bundled configs; ``gpus``: the target devices."""
    if command.args.command == "models":
        _models(command.args.pattern, console)
    else:
        from vramsim.views.devices import render_devices

        render_devices(console)
    return 0
