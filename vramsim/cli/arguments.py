"""The ``vramsim`` command line: its parser, and the ``simulate`` keywords read back from what it parsed."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import fields
from typing import Any, NoReturn

from vramsim.cli.pages import add_page_arguments
from vramsim.cli.renamed import renamed_arguments
from vramsim.config import DiffusionOptions, options
from vramsim.config.options import COMMANDS
from vramsim.config.quantization import lora_of_rank
from vramsim.config.serving import serve_options
from vramsim.config.user_files import user_function_file
from vramsim.config.workload import default_task
from vramsim.errors import ConfigError
from vramsim.estimators.assumptions import MODEL_FLOPS_UTILISATION
from vramsim.estimators.sharding.plan import OFFLOAD_CHOICES

__all__ = [
    "ANY_DEVICE_DEFAULT",
    "BAD_ARGUMENT_EXIT",
    "NOT_FIT_EXIT",
    "PLAN_CHOSEN",
    "argument_warnings",
    "build_parser",
    "parse_arguments",
    "serve_compare_parser",
    "serving_options",
    "subparser",
    "workload_options",
]

BAD_ARGUMENT_EXIT = 2
"""Exit status of a bad argument: one argparse refuses, or an option value the config's checks refuse."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, like every other vramsim error."""

    def error(self, message: str) -> NoReturn:
        print(f"vramsim: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(BAD_ARGUMENT_EXIT)


class _HelpFormatter(argparse.HelpFormatter):
    """Each flag's default after its help, unless it has none to tell (``None``, a switch) or its help already
    says what applies when it is not given (``default: ...``, ``none given: ...``, ``...; default 2r``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        told = re.search(r"\bdefault:|\bnone given\b|; default \S+$", text) is not None
        if not action.option_strings or action.default in (None, False, argparse.SUPPRESS) or told:
            return text
        return f"{text} (default: %(default)s)"

    def _split_lines(self, text: str, width: int) -> list[str]:
        """Wrapped at spaces only: a flag named in the help (``--max-model-len``) is never split at its hyphens."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _Default(str):
    """A default told apart from the same text given on the command line (by identity)."""


_ALL_LINEAR = _Default("all-linear")
_NO_CHECKPOINTING = _Default("none")


PLAN_CHOSEN = frozenset(
    {
        "device",
        "gpus",
        "dp",
        "tp",
        "pp",
        "cp",
        "ep",
        "zero",
        "fsdp",
        "pp_schedule",
        "checkpointing",
        "gradient_checkpointing",
        "offload",
    }
)
"""Options ``plan`` does not offer: each offer gives the GPUs, the strategy search the layout and checkpointing."""

_PIPELINE_OPTIONS = frozenset(spec.name for spec in fields(DiffusionOptions))
"""The options only a diffusion pipeline reads, which ``checkpoint`` (a single model's) does not offer."""

_STATE_OFFLOADS = tuple(choice for choice in OFFLOAD_CHOICES if choice != "none")
OFFLOADS = ("none", "model", "sequential", *_STATE_OFFLOADS)
"""``--offload``: one flag for both CPU offloads, a pipeline's (``offload``) and sharded training's (``offload_states``)."""


def _as_given(text: str) -> str:
    """A flag's text as it is; a str default too, which argparse passes through ``type`` (``_Default`` kept)."""
    return text


def _offload_flag(text: str) -> str:
    """``--offload``'s value, ``no`` (a pipeline's old spelling) being ``none``."""
    value = text.strip().lower()
    return "none" if value == "no" else value


def _offload_argument(parser: argparse.ArgumentParser, *, pipelines: bool) -> None:
    """``--offload``, with a pipeline's choices where the command traces pipelines."""
    pipeline = (
        "a diffusion pipeline's as diffusers does it, model (enable_model_cpu_offload: only the running component's "
        "weights on the device) or sequential (enable_sequential_cpu_offload: only the running layer's); "
    )
    parser.add_argument(
        "--offload",
        type=_offload_flag,
        choices=OFFLOADS if pipelines else ("none", *_STATE_OFFLOADS),
        default="none",
        metavar="OFFLOAD",
        help=f"CPU offload: {pipeline if pipelines else ''}sharded training's model states, optimizer (ZeRO "
        "offload_optimizer: fp32 master, gradients, optimizer states on the host) or params (also the weights: "
        "ZeRO-3 offload_param, FSDP2 CPUOffloadPolicy); or none",
    )


ANY_DEVICE_DEFAULT = _Default("any")
"""``fit``'s device when none is given: every GPU of the catalog judged (told apart from ``--device any``)."""


def _workload_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The model, then one argument per ``SimulationConfig`` option the command takes."""
    parser.add_argument("model", help="Hugging Face id, bundled id (vramsim models), folder or config.json")
    offered = "trace" if command in ("fit", "checkpoint", "compare", "inspect", "plan", "sweep") else command
    for spec, option in options():
        if not option.cli or offered not in option.commands or spec.name == "offload_states":
            continue
        if command == "plan" and spec.name in PLAN_CHOSEN:
            continue
        if command == "checkpoint" and spec.name in _PIPELINE_OPTIONS:
            continue
        flag = option.flag or "--" + spec.name.replace("_", "-")
        default = option.defaults.get(offered, spec.default)
        if spec.name == "checkpointing":  # told apart from "none" given, which --gradient-checkpointing overrides
            default = _NO_CHECKPOINTING
        if spec.name == "offload":
            _offload_argument(parser, pipelines=True)
        elif isinstance(spec.default, bool):
            parser.add_argument(flag, dest=spec.name, action="store_true", help=option.help)
        else:
            metavar = flag.removeprefix("--").replace("-", "_").upper()
            parser.add_argument(
                flag, dest=spec.name, type=option.parse or _as_given, default=default, metavar=metavar, help=option.help
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
    if command == "checkpoint":
        _offload_argument(parser, pipelines=False)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    if command not in ("validate", "inspect", "sweep"):
        add_page_arguments(parser, command)
    if command in ("trace", "inspect"):
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
    add_page_arguments(parser, "serve")


def _checkpoint_arguments(saved: argparse.ArgumentParser) -> None:
    """How ``checkpoint`` saves and restores, beside the training workload it checkpoints."""
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


def _depth(text: str) -> int:
    """``--depth``: a whole number, 0 or more."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a depth: give 0 (the model alone), 1, 2, ...")
    return int(text)


def _graph_file(text: str) -> str:
    """``--graph``: a file the graph export writes (by its suffix)."""
    from vramsim.views.graph_export import graph_format

    try:
        graph_format(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    """How deep ``inspect`` shows the module tree, and where it writes the op/storage graph."""
    parser.add_argument(
        "--depth",
        type=_depth,
        default=None,
        help="module tree levels below the model (0: the model alone); none given: down to the repeated "
        "block (the decoder layer), as the per-layer table",
    )
    parser.add_argument(
        "--graph",
        type=_graph_file,
        default=None,
        metavar="FILE",
        help="write the op/storage graph (each node's kind, op, module, shape, dtype, bytes, alloc and free "
        "event, phase): FILE.graphml (networkx.read_graphml) or FILE.dot (Graphviz)",
    )


def _compare_arguments(compare: argparse.ArgumentParser) -> None:
    """How ``compare`` takes its variants and shows them, beside the shared workload (or serving) flags."""
    compare.add_argument(
        "--serve",
        action="store_true",
        help="compare serving deployments: the shared flags and each variant are serve's (the KV cache dtype, "
        "--gpu-memory-utilization, --max-model-len, --tp, --engine...; see vramsim compare --serve --help)",
    )
    compare.add_argument(
        "--variants",
        metavar="FILE.toml",
        help='named variants, each a flags string (qlora = "--quantization nf4 --lora-rank 16") or a table of '
        'flags without their dashes ([qlora] quantization = "nf4" lora-rank = 16), instead of the strings after --',
    )
    compare.set_defaults(variant_flags=None)  # the strings after --, split off before parsing (cli/variants.py)


def _span_hours(text: str) -> float:
    """A time span as hours: a number more than 0 and its unit, ``h`` (hours) or ``d`` (days)."""
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if unit not in ("h", "d"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a span: a number and h (hours) or d (days), e.g. 36h or 2d")
    value = _positive(float)(number)
    return float(value) * (24 if unit == "d" else 1)


def _positive(kind: type[int] | type[float]) -> Any:
    """A flag's number, more than 0."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not more than 0")
        return value

    return parse


def _plan_arguments(planned: argparse.ArgumentParser) -> None:
    """The price sheet and the duration ``plan`` quotes over."""
    planned.add_argument(
        "--prices", required=True, metavar="SHEET", help="the price sheet: TOML or JSON (examples/prices.example.toml)"
    )
    duration = planned.add_mutually_exclusive_group(required=True)
    duration.add_argument("--days", type=_positive(float), help="the job's duration in days")
    duration.add_argument("--hours", type=_positive(float), help="the job's duration in hours")
    duration.add_argument(
        "--tokens",
        type=_positive(int),
        help="training tokens: the duration is their steps' traced FLOPs over each offer's GPUs at --mfu of their peak",
    )
    planned.add_argument(
        "--mfu",
        type=_positive(float),
        default=None,
        help="with --tokens: the share of the GPUs' dense peak a step runs at; none given: MODEL_FLOPS_UTILISATION "
        f"({MODEL_FLOPS_UTILISATION:.2f}, estimators/assumptions.py)",
    )
    planned.add_argument(
        "--max-gpus", type=_positive(int), default=None, help="the most GPUs an order may have; none given: all an offer has"
    )
    planned.add_argument(
        "--stop-after",
        type=_span_hours,
        metavar="SPAN",
        help="what each quote pays anyway if the job stops after SPAN (36h, 2d): a started period is paid whole",
    )
    planned.add_argument(
        "--fail-if-none",
        action="store_true",
        help=f"exit with status {NOT_FIT_EXIT} when no offer holds the job (for scripts and CI)",
    )


SWEPT = ("batch_size", "seq_len", "device", "checkpointing", "gpus")
"""The options ``sweep`` takes as lists or ranges: its axes."""


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The axes as lists (``a,b,c``) or ranges (``start:stop[:step]``, ``xK`` multiplying), where the traces run,
    and the CSV output."""
    for action in parser._actions:
        if action.dest in SWEPT:
            ranges = action.dest in ("batch_size", "seq_len", "gpus")
            action.type = _as_given
            action.default = action.default if action.default is None or isinstance(action.default, str) else str(action.default)
            action.help = (
                f"{action.help}; a list a,b,c{' or a range start:stop[:step] (xK: a step that multiplies)' if ranges else ''}"
            )
    parser.add_argument("--csv", action="store_true", help="print every point as CSV instead of the table")
    parser.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where the traces run: local worker processes, or the Ray cluster at --address (pip install 'vramsim[ray]')",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="with --backend ray: the cluster's address, as ray.init(address=...) takes it; none given: RAY_ADDRESS, "
        "else Ray starts one on this machine",
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="local worker processes (1: trace in this process); none given: one per CPU"
    )


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and its flags, built from the options' own specs so the CLI and the API agree."""
    parser = _Parser(prog="vramsim", description="Predict the GPU memory of a PyTorch job before it reaches a GPU.")
    parser.add_argument("--version", action="version", version=f"vramsim {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    helps = {
        "trace": "trace a workload and report its peak memory",
        "validate": "run the workload for real on the CPU and compare with the prediction",
    }
    for command in COMMANDS:
        sub = commands.add_parser(command, help=helps[command], formatter_class=_HelpFormatter)
        _workload_arguments(sub, command)
        _run_arguments(sub, command)
    fit = commands.add_parser(
        "fit",
        help="the largest batch size and sequence length that fit the target, each traced",
        formatter_class=_HelpFormatter,
    )
    _workload_arguments(fit, "fit")
    _run_arguments(fit, "fit")
    device = next(action for action in fit._actions if action.dest == "device")
    device.default = ANY_DEVICE_DEFAULT
    device.help = f"{device.help}; any: the smallest GPUs of the catalog that hold the job (with --strategies: h100)"
    saved = commands.add_parser(
        "checkpoint",
        help="a training checkpoint's files on disk, and the memory to save and restore it",
        formatter_class=_HelpFormatter,
    )
    _workload_arguments(saved, "checkpoint")
    _checkpoint_arguments(saved)
    _run_arguments(saved, "checkpoint")
    serve = commands.add_parser(
        "serve",
        help="the KV cache a serving engine (vLLM, SGLang) gets, and the concurrency",
        formatter_class=_HelpFormatter,
    )
    _serve_arguments(serve)
    _run_arguments(serve, "serve")
    inspected = commands.add_parser(
        "inspect",
        help="a model's memory by module, its largest temporaries and what holds the peak; its op/storage graph",
        formatter_class=_HelpFormatter,
    )
    _workload_arguments(inspected, "inspect")
    _inspect_arguments(inspected)
    _run_arguments(inspected, "inspect")

    compare = commands.add_parser(
        "compare",
        help="two or more variants of one job side by side, one trace per distinct program",
        usage="%(prog)s MODEL [flags] (-- VARIANT ... | --variants FILE.toml)",
        description='each VARIANT is a quoted string of trace\'s flags over the shared ones, "" the shared flags '
        'alone, e.g. vramsim compare meta-llama/Llama-3.1-8B --task train -- "--lora-rank 16" "--quantization nf4 '
        '--lora-rank 16" ""',
        formatter_class=_HelpFormatter,
    )
    _workload_arguments(compare, "compare")
    _compare_arguments(compare)
    _run_arguments(compare, "compare")
    planned = commands.add_parser(
        "plan",
        help="the offers of a price sheet that hold a training job, each with its cheapest setting and quote",
        usage="%(prog)s MODEL [flags] --prices SHEET\n         (--days D | --hours H | --tokens N)",
        formatter_class=_HelpFormatter,
    )
    _workload_arguments(planned, "plan")
    _plan_arguments(planned)
    _run_arguments(planned, "plan")
    swept = commands.add_parser(
        "sweep",
        help="every point of a grid of batch sizes, lengths, devices, checkpointing and GPUs, most derived from a few traces",
        formatter_class=_HelpFormatter,
    )
    _workload_arguments(swept, "sweep")
    _sweep_arguments(swept)
    _run_arguments(swept, "sweep")
    listed = commands.add_parser("models", help="list the bundled model configs: family, parameters, tasks")
    listed.add_argument(
        "pattern", nargs="?", help="only ids containing PATTERN (any case), or matching it as a glob (*, ?, [...])"
    )
    commands.add_parser("gpus", help="list the target devices")
    return parser


def serve_compare_parser() -> argparse.ArgumentParser:
    """``compare --serve``'s parser: serve's flags, then compare's own; its namespace is a ``compare``'s."""
    parser = _Parser(
        prog="vramsim compare --serve",
        usage="%(prog)s MODEL [flags] (-- VARIANT ... | --variants FILE.toml)",
        description='each VARIANT is a quoted string of serve\'s flags over the shared ones, "" the shared flags '
        'alone, e.g. vramsim compare meta-llama/Llama-3.1-8B --serve --device h100-sxm -- "" "--kv-cache-dtype fp8" '
        '"--gpu-memory-utilization 0.95"',
        formatter_class=_HelpFormatter,
    )
    _serve_arguments(parser)
    _compare_arguments(parser)
    _run_arguments(parser, "compare")
    parser.set_defaults(command="compare")
    return parser


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """``argv`` (the strings after ``compare``'s ``--`` split off) read by its command's parser; ``compare --serve``
    by serve's flags. An argument no parser takes exits 2 in one line, named by the command's own parser."""
    if argv[:1] == ["compare"] and "--serve" in argv:
        parser = serve_compare_parser()
        args, extra = parser.parse_known_args(argv[1:])
    else:
        top = build_parser()
        args, extra = top.parse_known_args(argv)
        parser = subparser(top, args.command)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _version() -> str:
    """The installed package's version, from its metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vramsim")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


NOT_FIT_EXIT = 3
"""Exit status of ``trace --fail-if-not-fit`` when the job does not fit (1 is an error, 2 a bad argument)."""


_CACHED_COMMANDS = ("trace", "fit", "plan", "serve", "compare", "inspect", "checkpoint", "sweep")
"""The commands whose answers the result cache keeps (``vramsim/cache/``), each with ``--no-cache``."""


def _run_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """How the command runs rather than what it simulates."""
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (a spinner on a terminal; otherwise a line per stage once the command has run a few seconds)",
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
        parser.add_argument(
            "--verbose", action="store_true", help="with --strategies: list each layout not tried, not only the count per reason"
        )
    if command in _CACHED_COMMANDS:
        parser.add_argument(
            "--no-cache",
            action="store_true",
            help="trace even when the result cache ($XDG_CACHE_HOME/vramsim) holds this request's answer (docs/cache.md)",
        )
    if command == "trace":
        parser.add_argument(
            "--fail-if-not-fit",
            action="store_true",
            help=f"exit with status {NOT_FIT_EXIT} when the job does not fit (for scripts and CI)",
        )
        parser.add_argument(
            "--quick",
            action="store_true",
            help="a job that does not fit gets only the advice this trace gives (checkpointing, sharding, the "
            "allocator): no re-traced dtype, optimizer, batch size or sequence length",
        )
        parser.add_argument(
            "--memory-viz",
            metavar="PATH",
            help="write the caching allocator's simulated history as a torch.cuda.memory._snapshot() pickle, for "
            "pytorch.org/memory_viz (docs/exports.md)",
        )
        parser.add_argument(
            "--chrome-trace",
            metavar="PATH",
            help="write the ops and the allocated/reserved memory as a Chrome trace JSON, for ui.perfetto.dev (docs/exports.md)",
        )
    renamed_arguments(parser, command)  # last: each old flag takes its new flag's parsing, so that flag must exist


_USER_FUNCTIONS = {"inputs": "def {name}(batch_size, seq_len) -> dict", "loss": "def {name}(output) -> torch.Tensor"}
"""Options the command line names as path/to/file.py:function, with what the function must be."""


def workload_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``simulate`` keywords the command line gave; ``--lora-rank`` R becomes a LoRA of rank R, ``--offload``
    the option of its kind, a ``path/to/file.py:function`` the function (importing the user's file); the task,
    where none is given, the model's (``config.workload.default_task``, read without torch)."""
    given = {spec.name: getattr(args, spec.name) for spec, _ in options() if hasattr(args, spec.name)}
    if given.get("task") is None:
        given["task"] = default_task(args.model)
    if "seq_len" in given and given["seq_len"] is None:  # the model's default, once it is loaded (with_model_defaults)
        del given["seq_len"]
    if hasattr(args, "offload"):  # one flag, two options: a pipeline's offload and sharded training's
        states = args.offload in _STATE_OFFLOADS
        given["offload"] = "no" if states or args.offload == "none" else args.offload
        given["offload_states"] = args.offload if states else "none"
    for name, signature in _USER_FUNCTIONS.items():
        if name == "loss" and given[name] is not None and ".py" not in given[name]:
            continue  # a named loss (vramsim/workload/losses.py), checked with the other options
        if given[name] is not None:
            user_function_file(given[name], name)  # a bad path is a bad argument, answered before torch loads
            from vramsim.workload.models import load_function

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


def serving_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``serve`` keywords the command line gave, checked as ``ServeConfig`` checks them, the device too: a bad
    value is refused before torch loads."""
    from vramsim.config.serving import ServeConfig
    from vramsim.estimators.devices import get_device

    given = {spec.name: getattr(args, spec.name) for spec, _ in serve_options()}
    ServeConfig(**given)
    get_device(given["device"])
    return given


def argument_warnings(args: argparse.Namespace) -> list[str]:
    """What only the command line can tell is easy to misread: ``--checkpointing none`` beside
    ``--gradient-checkpointing``, which checkpoints in full."""
    if args.gradient_checkpointing and args.checkpointing == "none" and args.checkpointing is not _NO_CHECKPOINTING:
        return ["--gradient-checkpointing is --checkpointing full; it overrides the --checkpointing none given"]
    return []


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand, whose ``--help`` lists what that command takes."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub: argparse.ArgumentParser = action.choices[command]
    return sub
