"""The ``vramsim`` command: the only place that prints or exits."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from rich.console import Console

from vramsim import model_zoo

from .api import simulate
from .config import COMMANDS, lora_of_rank, options
from .errors import ConfigError, VramsimError
from .models import load_function
from .render import render_devices, render_report, render_serve, render_validations
from .serve_config import serve_options
from .validation import validate

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, like every other vramsim error."""

    def error(self, message: str) -> NoReturn:
        print(f"vramsim: error: {message} (see vramsim {self.prog.split()[-1]} --help)", file=sys.stderr)
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
            parser.add_argument(flag, dest=spec.name, type=option.parse or str, default=default, metavar=metavar,
                                help=option.help)  # fmt: skip
        if spec.name == "lora":
            parser.add_argument("--lora-targets", default=_ALL_LINEAR,
                                help="comma-separated module names for --lora-rank, or all-linear (peft's: every "
                                "linear layer but the output head)")  # fmt: skip
            parser.add_argument("--lora-alpha", type=float, default=None, help="LoRA alpha (peft's lora_alpha); default 2r")
            parser.add_argument("--lora-dropout", type=float, default=0.0, help="dropout on the adapters' input (lora_dropout)")
            parser.add_argument("--dora", action="store_true", help="weight-decomposed LoRA (peft's use_dora=True)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    if command == "trace":
        parser.add_argument("--layers", choices=("fold", "all"), default="fold",
                            help="fold: alike layers in one row (model.layers.0-31 x32); all: a row for each")  # fmt: skip


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, then one argument per ``ServeConfig`` option."""
    parser.add_argument("model", help="Hugging Face id, bundled id (vramsim models), folder or config.json")
    for spec, option in serve_options():
        flag = option.flag or "--" + spec.name.replace("_", "-")
        if isinstance(spec.default, bool):
            parser.add_argument(flag, dest=spec.name, action="store_true", help=option.help)
        else:
            parser.add_argument(flag, dest=spec.name, type=option.parse or str, default=spec.default,
                                metavar=flag.removeprefix("--").replace("-", "_").upper(), help=option.help)  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vramsim", description="Predict the GPU memory of a PyTorch job before it reaches a GPU.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    helps = {"trace": "trace a workload and report its peak memory",
             "validate": "run the workload for real on the CPU and compare with the prediction"}  # fmt: skip
    for command in COMMANDS:
        sub = commands.add_parser(command, help=helps[command], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        _workload_arguments(sub, command)
    serve = commands.add_parser("serve", help="the KV cache a serving engine (vLLM, SGLang) gets, and the concurrency",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    _serve_arguments(serve)
    commands.add_parser("models", help="list the bundled model configs")
    commands.add_parser("gpus", help="list the target devices")
    return parser


_USER_FUNCTIONS = {"inputs": "def {name}(batch_size, seq_len) -> dict", "loss": "def {name}(output) -> torch.Tensor"}
"""Options the command line names as path/to/file.py:function, with what the function must be."""


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``simulate`` keywords the command line gave; ``--lora-rank`` R becomes a LoRA of rank R."""
    given = {spec.name: getattr(args, spec.name) for spec, _ in options() if hasattr(args, spec.name)}
    for name, signature in _USER_FUNCTIONS.items():
        if given[name] is not None:
            given[name] = load_function(given[name], signature)
    shaped = args.lora_targets is not _ALL_LINEAR or args.lora_alpha is not None or args.lora_dropout or args.dora
    if given["lora"] is None and shaped:
        raise ConfigError("--lora-targets, --lora-alpha, --lora-dropout and --dora shape LoRA adapters; "
                          "give their rank with --lora-rank R")  # fmt: skip
    if given["lora"] is not None:
        given["lora"] = lora_of_rank(given["lora"], args.lora_targets, alpha=args.lora_alpha, dropout=args.lora_dropout,
                                     dora=args.dora)  # fmt: skip
    return given


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args = _build_parser().parse_args(argv)
    console = Console()
    try:
        if args.command == "models":
            for model_id in model_zoo.model_ids():
                print(model_id)
            for pipeline_id in model_zoo.pipeline_ids():
                print(f"{pipeline_id}  (diffusion pipeline: --task generate)")
        elif args.command == "gpus":
            render_devices(console)
        elif args.command == "trace":
            report = simulate(args.model, **_options(args))
            for warning in report.warnings:
                print(f"vramsim: warning: {warning}", file=sys.stderr)
            if args.json:
                print(json.dumps(report.to_dict(), indent=2))
            else:
                render_report(report, console, fold=args.layers == "fold")
        elif args.command == "serve":
            from .serve import serve

            served = serve(args.model, **{spec.name: getattr(args, spec.name) for spec, _ in serve_options()})
            if args.json:
                print(json.dumps(served.to_dict(), indent=2))
            else:
                render_serve(served, console)
        elif args.command == "validate":
            result = validate(args.model, **_options(args))
            if args.json:
                print(json.dumps(result.to_dict(), indent=2))
            else:
                render_validations([result], console)
    except VramsimError as exc:
        print(f"vramsim: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print("vramsim: error: out of host memory; try a smaller --batch-size or --seq-len", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
