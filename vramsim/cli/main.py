"""The ``vramsim`` command: the only place that prints or exits."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from rich.console import Console

from vramsim import model_zoo
from vramsim.config.serving import serve_options
from vramsim.config.simulation import COMMANDS, lora_of_rank, options
from vramsim.errors import ConfigError, VramsimError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, like every other vramsim error."""

    def error(self, message: str) -> NoReturn:
        print(f"vramsim: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


class _Default(str):
    """A default told apart from the same text given on the command line (by identity)."""


_ALL_LINEAR = _Default("all-linear")


def _workload_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The model, then one argument per ``SimulationConfig`` option the command takes."""
    parser.add_argument("model", help="Hugging Face id, bundled id (vramsim models), folder or config.json")
    for spec, option in options():
        if not option.cli or command not in option.commands:
            continue
        flag = option.flag or "--" + spec.name.replace("_", "-")
        default = option.defaults.get(command, spec.default)
        if isinstance(spec.default, bool):
            parser.add_argument(flag, dest=spec.name, action="store_true", help=option.help)
        else:
            metavar = flag.removeprefix("--").replace("-", "_").upper()
            parser.add_argument(
                flag, dest=spec.name, type=option.parse or str, default=default, metavar=metavar, help=option.help
            )
        if spec.name == "lora":
            parser.add_argument(
                "--lora-targets",
                default=_ALL_LINEAR,
                help="comma-separated module names for --lora-rank, or all-linear (peft's: every "
                "linear layer but the output head)",
            )
            parser.add_argument("--lora-alpha", type=float, default=None, help="LoRA alpha (peft's lora_alpha); default 2r")
            parser.add_argument("--lora-dropout", type=float, default=0.0, help="dropout on the adapters' input (lora_dropout)")
            parser.add_argument("--dora", action="store_true", help="weight-decomposed LoRA (peft's use_dora=True)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    if command == "trace":
        parser.add_argument(
            "--layers",
            choices=("fold", "all"),
            default="fold",
            help="fold: alike layers in one row (model.layers.0-31 x32); all: a row for each",
        )


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, then one argument per ``ServeConfig`` option."""
    parser.add_argument("model", help="Hugging Face id, bundled id (vramsim models), folder or config.json")
    for spec, option in serve_options():
        flag = option.flag or "--" + spec.name.replace("_", "-")
        if isinstance(spec.default, bool):
            parser.add_argument(flag, dest=spec.name, action="store_true", help=option.help)
        else:
            parser.add_argument(
                flag,
                dest=spec.name,
                type=option.parse or str,
                default=spec.default,
                metavar=flag.removeprefix("--").replace("-", "_").upper(),
                help=option.help,
            )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vramsim", description="Predict the GPU memory of a PyTorch job before it reaches a GPU.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    helps = {
        "trace": "trace a workload and report its peak memory",
        "validate": "run the workload for real on the CPU and compare with the prediction",
    }
    for command in COMMANDS:
        sub = commands.add_parser(command, help=helps[command], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        _workload_arguments(sub, command)
        _run_arguments(sub, command)
    fit = commands.add_parser(
        "fit",
        help="the largest batch size and sequence length that fit the target, each traced",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _workload_arguments(fit, "trace")
    _run_arguments(fit, "fit")
    saved = commands.add_parser(
        "checkpoint",
        help="a training checkpoint's files on disk, and the memory to save and restore it",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _workload_arguments(saved, "trace")
    saved.add_argument(
        "--save-format",
        default=None,
        metavar="SAVE_FORMAT",
        help="trainer: the Hugging Face Trainer's folder (safetensors weights, optimizer.pt, ...); torch: "
        'the plain loop\'s torch.save({"model": ..., "optimizer": ...}); dcp: torch.distributed.checkpoint, '
        "a file per rank (the default with --fsdp; DDP too); deepspeed: DeepSpeed's ZeRO files (the default "
        "with --zero); default: trainer",
    )
    saved.add_argument(
        "--map-location",
        default=None,
        metavar="MAP_LOCATION",
        help="where torch.load puts what it loads on restore: cpu or device (default: the Trainer's, "
        "cpu on one GPU, the device with --gpus > 1; torch.load's own, the device, for --save-format "
        "torch)",
    )
    saved.add_argument(
        "--async-save", action="store_true", help="dcp.async_save: each rank's state is staged in host memory while it is written"
    )
    _run_arguments(saved, "checkpoint")
    serve = commands.add_parser(
        "serve",
        help="the KV cache a serving engine (vLLM, SGLang) gets, and the concurrency",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _serve_arguments(serve)
    _run_arguments(serve, "serve")
    commands.add_parser("models", help="list the bundled model configs")
    commands.add_parser("gpus", help="list the target devices")
    return parser


NOT_FIT_EXIT = 3
"""Exit status of ``trace --fail-if-not-fit`` when the job does not fit (1 is an error, 2 a bad argument)."""


def _run_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """How the command runs rather than what it simulates."""
    parser.add_argument(
        "--quiet", action="store_true", help="no progress display on stderr (none either when stderr is not a terminal)"
    )
    if command == "fit":
        parser.add_argument(
            "--strategies",
            action="store_true",
            help="with --gpus N: tensor, pipeline, context and expert parallel layouts, data-parallel "
            "schemes and checkpointing choices (auto included) on 1, 2, 4, ... N GPUs, one trace per "
            "tp/cp/ep degree, the cheapest that fits (fewest GPUs, least recompute and pipeline bubble, "
            "least communication), then the largest sizes under it",
        )
    if command == "trace":
        parser.add_argument(
            "--fail-if-not-fit",
            action="store_true",
            help=f"exit with status {NOT_FIT_EXIT} when the job does not fit (for scripts and CI)",
        )
        parser.add_argument(
            "--no-search",
            action="store_true",
            help="a job that does not fit gets only the advice this trace gives (checkpointing): no "
            "re-traced dtype, optimizer, batch size or sequence length",
        )


_USER_FUNCTIONS = {"inputs": "def {name}(batch_size, seq_len) -> dict", "loss": "def {name}(output) -> torch.Tensor"}
"""Options the command line names as path/to/file.py:function, with what the function must be."""


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``simulate`` keywords the command line gave; ``--lora-rank`` R becomes a LoRA of rank R."""
    given = {spec.name: getattr(args, spec.name) for spec, _ in options() if hasattr(args, spec.name)}
    from vramsim.workload.models import load_function

    for name, signature in _USER_FUNCTIONS.items():
        if name == "loss" and given[name] is not None and ".py" not in given[name]:
            continue  # a named loss (vramsim/workload/losses.py), checked with the other options
        if given[name] is not None:
            given[name] = load_function(given[name], signature)
    shaped = args.lora_targets is not _ALL_LINEAR or args.lora_alpha is not None or args.lora_dropout or args.dora
    if given["lora"] is None and shaped:
        raise ConfigError(
            "--lora-targets, --lora-alpha, --lora-dropout and --dora shape LoRA adapters; give their rank with --lora-rank R"
        )
    if given["lora"] is not None:
        given["lora"] = lora_of_rank(
            given["lora"], args.lora_targets, alpha=args.lora_alpha, dropout=args.lora_dropout, dora=args.dora
        )
    return given


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub: argparse.ArgumentParser = action.choices[command]
    return sub


def _flag_names() -> dict[str, str]:
    """Each option's Python name and its flag."""
    named = [*options(), *serve_options()]
    return {spec.name: option.flag or "--" + spec.name.replace("_", "-") for spec, option in named if option.cli}


def _in_cli_words(message: str) -> str:
    """An API message as the command line says it: ``seq_len`` is ``--seq-len``, ``task='train'`` is ``--task train``.
    A name without an underscore is only rewritten with its value (``device='cpu'``): alone it is an English word."""
    for name, flag in _flag_names().items():
        message = re.sub(rf"(?<![\w./(-]){name}='?([^\s',;)]+)'?", rf"{flag} \1", message)
        if "_" in name:
            message = re.sub(rf"(?<![\w./(-])(?<!, ){name}(?![\w=,])", flag, message)  # not in a signature (a, b)
    return message


@contextlib.contextmanager
def _progress(args: argparse.Namespace, text: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while the command works, told what it is doing; none when ``--quiet`` or when
    stderr is not a terminal (a pipe or a log file gets only the result)."""
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        yield lambda _: None
        return
    with Console(stderr=True).status(text) as status:
        yield lambda update: status.update(update)


def _more_advice(model: str, report: Any, given: dict[str, Any], tell: Callable[[str], None]) -> list[str]:
    """A job that does not fit: the report's advice, then what needs more traces (another weight dtype or
    optimizer, the largest batch size and sequence length), each traced."""
    from vramsim.search.advice import retraced_advice
    from vramsim.search.fitting import largest_fit
    from vramsim.views.fit import fit_advice

    advice = [*report.advice, *retraced_advice(model, report, given, progress=tell)]
    if report.task != "generate" and not report.components and given["checkpointing"] != "all":
        advice += fit_advice(largest_fit(model, traced=report, progress=tell, **given))
    return advice


def _trace(args: argparse.Namespace, console: Console) -> int:
    from vramsim.api import simulate
    from vramsim.views.report import render_report

    given = _options(args)
    with _progress(args, f"tracing {args.model}") as tell:
        report = simulate(args.model, **given)
        if report.fits is False and not args.no_search:
            report = dataclasses.replace(report, advice=_more_advice(args.model, report, given, tell))
    for warning in report.warnings:
        print(f"vramsim: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        render_report(report, console, fold=args.layers == "fold")
    if args.fail_if_not_fit and report.fits is None:
        raise ConfigError("--fail-if-not-fit judges a GPU's memory; the cpu target has no fixed size (choose --device)")
    return NOT_FIT_EXIT if args.fail_if_not_fit and report.fits is False else 0


def _show(args: argparse.Namespace, result: Any, render: Callable[[Any, Console], None], console: Console) -> None:
    """``--json``: the result's data; else its terminal view."""
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render(result, console)


def _run(args: argparse.Namespace, console: Console) -> int:
    """The command's work, once its arguments parsed."""
    if args.command == "models":
        for model_id in model_zoo.model_ids():
            print(model_id)
        from vramsim.workload.diffusion.pipelines import find_pipeline
        from vramsim.workload.diffusion.training import RECIPES

        for pipeline_id in model_zoo.pipeline_ids():
            spec = find_pipeline(pipeline_id)
            tasks = "generate or train" if spec is not None and spec.class_name in RECIPES else "generate"
            print(f"{pipeline_id}  (diffusion pipeline: --task {tasks})")
    elif args.command == "gpus":
        from vramsim.views.devices import render_devices

        render_devices(console)
    elif args.command == "trace":
        return _trace(args, console)
    elif args.command == "fit":
        from vramsim.search.fitting import largest_fit
        from vramsim.search.strategy import cheapest_strategy
        from vramsim.views.fit import render_fit, render_strategies

        options = _options(args)
        with _progress(args, f"searching the largest fit of {args.model}") as tell:
            search = cheapest_strategy(args.model, progress=tell, **options) if args.strategies else None
            if search is not None and search.cheapest is None:
                fit = None
            else:
                fit = largest_fit(args.model, progress=tell, **options | (search.options() if search else {}))
        if search is None:
            _show(args, fit, render_fit, console)
        elif args.json:
            print(json.dumps({"strategies": search.to_dict(), "largest": fit.to_dict() if fit else None}, indent=2))
        else:
            render_strategies(search, console)
            if fit is not None:
                console.print("Under that setting:")
                render_fit(fit, console)
    elif args.command == "checkpoint":
        from vramsim.checkpoints.checkpoint import checkpoint
        from vramsim.views.checkpoint import render_checkpoint

        with _progress(args, f"tracing {args.model} and its checkpoint"):
            report = checkpoint(
                args.model,
                save_format=args.save_format,
                map_location=args.map_location,
                async_save=args.async_save,
                **_options(args),
            )
        _show(args, report, render_checkpoint, console)
    elif args.command == "serve":
        from vramsim.serving.budget import serve
        from vramsim.views.serving import render_serve

        with _progress(args, f"tracing {args.model}"):
            served = serve(args.model, **{spec.name: getattr(args, spec.name) for spec, _ in serve_options()})
        _show(args, served, render_serve, console)
    elif args.command == "validate":
        from vramsim.validation.validate import validate
        from vramsim.views.validation import render_validations

        with _progress(args, f"running {args.model} for real on the cpu"):
            result = validate(args.model, **_options(args))
        _show(args, result, lambda one, out: render_validations([one], out), console)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (``NOT_FIT_EXIT`` for ``trace --fail-if-not-fit`` that does not fit)."""
    parser = _build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command's own parser, whose --help lists what it takes
        _subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    console = Console()
    try:
        return _run(args, console)
    except VramsimError as exc:
        print(f"vramsim: error: {_in_cli_words(str(exc))}", file=sys.stderr)
        return 1
    except MemoryError:
        print("vramsim: error: out of host memory; try a smaller --batch-size or --seq-len", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
