"""``vramsim compare``'s variants: each a string of ``trace``'s flags (``serve``'s, with ``--serve``), after ``--``
or named in a TOML file, read by the very parser of the shared flags, so a flag means the same in a variant and a
bad one is the same one line.

A variant's flags come after the shared ones: a flag given in both takes the variant's value.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramsim.cli.arguments import (
    argument_warnings,
    build_parser,
    serve_compare_parser,
    serving_options,
    subparser,
    workload_options,
)
from vramsim.cli.renamed import renamed_warnings
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError

__all__ = ["COMPARE_OWN", "Variant", "compare_variants", "split_variants"]

COMPARE_OWN = ("json", "quiet", "variants", "html", "serve", "no_cache")
"""The destinations of ``compare``'s own flags, which say how to compare, not what: never a variant's."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant as given, checked: its label, its ``simulate`` keywords, what its checks warned of."""

    label: str
    """Its flags as given (empty: the shared flags alone), or its name in the ``--variants`` file."""
    options: dict[str, Any]
    """Its ``simulate`` keywords, or ``serve``'s with ``--serve``."""
    warnings: tuple[str, ...]


def split_variants(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``compare``'s arguments before ``--`` and the variants after it (None: no ``--``); another command's as
    they are."""
    if not argv or argv[0] != "compare" or "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def compare_variants(args: argparse.Namespace) -> list[Variant]:
    """Each variant of ``compare``'s ``args``, from the strings after ``--`` or the ``--variants`` file, parsed over
    the shared flags and checked as ``trace`` (or ``serve``) checks its own; a bad one is an error naming the
    variant."""
    parser = serve_compare_parser() if args.serve else subparser(build_parser(), "compare")
    variants: list[Variant] = []
    loaded: dict[tuple[str, str], Any] = {}
    for label, text in _texts(args).items():
        named = f"variant {label!r}" if label else "the empty variant"
        try:
            parsed = _parsed(args, parser, named, text)
            warnings = renamed_warnings(parsed)
            if args.serve:
                options = serving_options(parsed)
            else:
                options = workload_options(parsed)
                warnings += argument_warnings(parsed)
                warnings += SimulationConfig.from_options(**options).warnings
        except (ConfigError, UnsupportedError) as exc:  # the variant's values; a model not found is every variant's
            raise type(exc)(f"{named}: {exc.own}", quoted=exc.quoted) from None
        for name in ("inputs", "loss"):  # one file.py:function imported once: the variants stay one program
            if callable(options.get(name)):
                options[name] = loaded.setdefault((name, getattr(parsed, name)), options[name])
        variants.append(Variant(label=label, options=options, warnings=tuple(warnings)))
    return variants


def _texts(args: argparse.Namespace) -> dict[str, str]:
    """Each variant's label and flags, from after ``--`` or from the ``--variants`` file: two or more."""
    if args.variants is not None and args.variant_flags is not None:
        raise ConfigError("give the variants after -- or in --variants FILE.toml, not both")
    if args.variants is not None:
        texts = _file_variants(Path(args.variants))
    else:
        texts = {}
        for text in args.variant_flags or []:
            if text.strip() in texts:
                raise ConfigError(f"variant {text.strip()!r} is given twice after --; give each once")
            texts[text.strip()] = text
    if len(texts) < 2:
        example = '"--kv-cache-dtype fp8"' if args.serve else '"--lora-rank 16"'
        raise ConfigError(
            f'compare takes two or more variants, got {len(texts)}: give them after --, e.g. -- {example} "" '
            "(an empty one: the shared flags alone), or in --variants FILE.toml"
        )
    return texts


def _parsed(args: argparse.Namespace, parser: argparse.ArgumentParser, named: str, text: str) -> argparse.Namespace:
    """``text``'s flags over the shared arguments: argparse keeps what a namespace already holds, so only the flags
    ``text`` gives change."""
    parser.exit_on_error = False  # a bad flag raises, so that the error names its variant
    try:
        parsed, extra = parser.parse_known_args([args.model, *shlex.split(text)], namespace=copy.copy(args))
    except (ValueError, argparse.ArgumentError) as exc:
        raise ConfigError(str(exc)) from None
    if extra:
        raise ConfigError(f"unrecognized arguments: {' '.join(extra)} (see {parser.prog} --help)")
    own = [dest for dest in COMPARE_OWN if getattr(parsed, dest) != getattr(args, dest)]
    if own:
        raise ConfigError(f"--{own[0]} says how to compare, not what: give it before --, with the shared flags")
    return parsed


def _file_variants(path: Path) -> dict[str, str]:
    """A TOML file's variants, each a flags string or a table of flags without their dashes, as flags strings:
    ``qlora = "--quantization nf4 --lora-rank 16"``, or ``[qlora]`` with ``quantization = "nf4"``, ``lora-rank = 16``."""
    try:
        table = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"--variants {path}: {exc.strerror}; give a TOML file of named variants") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--variants {path} is not TOML: {exc}") from None
    return {name: _flags(path, name, value) for name, value in table.items()}


def _flags(path: Path, name: str, value: Any) -> str:
    """One file variant as the flags string it stands for; ``true`` is a switch given, ``false`` one left out."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"--variants {path}: {name} = {value!r}; give a flags string or a table of flags")
    words: list[str] = []
    for key, each in value.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(each, dict | list):
            raise ConfigError(f"--variants {path}: {name}.{key} is a {type(each).__name__}; give {flag}'s value")
        if each is True:
            words.append(flag)
        elif each is not False:
            words += [flag, str(each)]
    return shlex.join(words)
