"""The ``vramsim`` command: the only place that prints or exits."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from rich.console import Console

from vramsim import model_zoo

from .api import simulate
from .errors import VramsimError
from .render import render_devices, render_report, render_validations
from .validation import validate

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, like every other vramsim error."""

    def error(self, message: str) -> NoReturn:
        print(f"vramsim: error: {message} (see vramsim {self.prog.split()[-1]} --help)", file=sys.stderr)
        sys.exit(2)


def _workload_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="Hugging Face id, bundled id (vramsim models), folder or config.json")
    parser.add_argument("--task", default="train", help="train, forward or generate (default: train)")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--dtype", default=None, help="weight dtype: fp32, bf16, fp16")
    parser.add_argument("--mixed-precision", default=None, help="autocast dtype: bf16 or fp16")
    parser.add_argument("--optimizer", default="adamw", help="adamw, adam, sgd, adafactor or none")
    parser.add_argument(
        "--checkpointing", default="none",
        help="activation checkpointing: none, full, every:K, selective, offload, or all for a table of each (default: none)",
    )  # fmt: skip
    parser.add_argument("--gradient-checkpointing", action="store_true", help="alias of --checkpointing full")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="decode steps for --task generate")
    parser.add_argument("--lora-rank", type=int, default=None, help="train LoRA adapters of this rank (peft)")
    parser.add_argument("--lora-targets", default="all-linear", help="comma-separated module names for LoRA")
    parser.add_argument("--model-class", default=None, help="transformers class, e.g. AutoModelForSequenceClassification")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow code from the model's Hub repository")
    parser.add_argument(
        "--moe-routing", default="balanced", help="MoE expert load: balanced, worst-case or capacity:F (default: balanced)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vramsim", description="Predict the GPU memory of a PyTorch job before it reaches a GPU.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    trace = commands.add_parser("trace", help="trace a workload and report its peak memory")
    _workload_arguments(trace)
    trace.add_argument("--device", default="h100", help="target device (vramsim gpus) or cpu")
    check = commands.add_parser("validate", help="run the workload for real on the CPU and compare with the prediction")
    _workload_arguments(check)
    check.add_argument("--device", default="cpu", help="device to measure on (cpu)")
    commands.add_parser("models", help="list the bundled model configs")
    commands.add_parser("gpus", help="list the target devices")
    trace.add_argument("--headroom", type=float, default=0.10, help="share of device memory kept free (default 0.10)")
    trace.add_argument(
        "--expandable-segments", action="store_true", help="model PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    )
    return parser


def _options(args: argparse.Namespace) -> dict[str, Any]:
    lora = None
    if args.lora_rank is not None:
        targets = args.lora_targets if args.lora_targets == "all-linear" else args.lora_targets.split(",")
        lora = {"r": args.lora_rank, "lora_alpha": 2 * args.lora_rank, "target_modules": targets}
    return {
        "task": args.task,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "device": args.device,
        "dtype": args.dtype,
        "mixed_precision": args.mixed_precision,
        "optimizer": None if args.optimizer.lower() == "none" else args.optimizer,
        "checkpointing": args.checkpointing,
        "gradient_checkpointing": args.gradient_checkpointing,
        "max_new_tokens": args.max_new_tokens,
        "lora": lora,
        "model_class": args.model_class,
        "trust_remote_code": args.trust_remote_code,
        "moe_routing": args.moe_routing,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args = _build_parser().parse_args(argv)
    console = Console()
    try:
        if args.command == "models":
            for model_id in model_zoo.model_ids():
                print(model_id)
        elif args.command == "gpus":
            render_devices(console)
        elif args.command == "trace":
            report = simulate(
                args.model, headroom=args.headroom, expandable_segments=args.expandable_segments, **_options(args)
            )
            if args.json:
                print(json.dumps(report.to_dict(), indent=2))
            else:
                render_report(report, console)
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
