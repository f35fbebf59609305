"""A request's key: the SHA-256 of everything its answer depends on, written out canonically.

What goes in: the kind of answer (``simulate``, ``plan``...), the model as given and its content (a config's every
field; a pipeline folder's or a builder file's bytes), every ``simulate`` option folded into ``SimulationConfig``'s
fields (defaults filled in, names made canonical, launch files' content; ``serve``'s folded into ``ServeConfig``'s;
``compare``'s, each variant's), the caller's further parts (a price sheet's content, a duration), vramsim's version
and its own source, the versions of the libraries whose code runs in the trace, and what the host's CPU kernels
read (threads, ISA). A part that cannot be written out exactly (a model object, a lambda, a closure,
trust_remote_code's own code) makes the request unkeyable: it is traced.

``canonical`` is vramsim's one way to write a request out, shared by every key: a plan's key
(``pricing/key.py``) writes its price sheet and duration with it too.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import platform
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.config import SimulationConfig
from vramsim.config.serving import ServeConfig
from vramsim.config.user_files import user_function_file
from vramsim.workload.models import ModelSource, load_config, model_name, pipeline_index

__all__ = ["LIBRARIES", "Options", "StandIn", "Unkeyable", "canonical", "digest", "model_content", "option_fields", "request_key"]

LIBRARIES = ("torch", "transformers", "diffusers", "peft", "accelerate", "bitsandbytes", "torchao")
"""The distributions whose code runs in a trace; a key holds each one's installed version (``None``: not installed)."""

_FILE_OPTIONS = ("deepspeed", "accelerate_config")
"""Options naming a file whose content the answer reads."""

_OWN_MODULES = frozenset(("vramsim", *LIBRARIES))
"""Top-level modules a callable from which is named by its qualified name (their versions are in the key)."""


class Unkeyable(Exception):
    """A part of the request that cannot be written out exactly."""


StandIn = Callable[[Any], str]
"""What a caller writes for a part that cannot be written out exactly, where a key must exist anyway (a plan's)."""

Options = Mapping[str, Any] | ServeConfig
"""A request's options: ``simulate``'s keywords (folded into ``SimulationConfig`` here), or a serving deployment's
``ServeConfig``, already folded by the caller (``ServeConfig(**options)``)."""


def request_key(kind: str, model: ModelSource, options: Options | Sequence[Options], **parts: Any) -> str | None:
    """The key of asking ``kind`` of ``model`` with ``options`` (a list: each variant of a comparison, in order)
    and the further ``parts`` (a ``Path`` stands for its file's content): 64 hex digits, or ``None`` where the
    request cannot be keyed.

    A bad option raises the ``ConfigError`` that ``simulate`` would, and an unknown model its
    ``ModelNotFoundError``.

    >>> request_key("simulate", "gpt2", {"task": "train"}) == request_key("simulate", "gpt2", {"task": "train", "batch_size": 1})
    True
    """
    several = isinstance(options, Sequence)
    configs = [_folded(each) for each in (options if isinstance(options, Sequence) else [options])]
    try:
        if any(getattr(config, "trust_remote_code", False) for config in configs):
            raise Unkeyable("the model's own code")
        written = [canonical(option_fields(config)) for config in configs]
        request = {
            "kind": kind,
            "model": {"name": model_name(model)} | model_content(model),
            "options": written if several else written[0],
            "parts": canonical(parts),
            "vramsim": [_version("vramsim"), _own_source()],
            "libraries": {name: _version(name) for name in LIBRARIES},
            "host": _host(),
        }
    except Unkeyable:
        return None
    return digest(request)


def digest(data: Any) -> str:
    """SHA-256 (hex) of JSON data (what ``canonical`` writes) with its keys sorted: one text per value."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _folded(options: Options) -> SimulationConfig | ServeConfig:
    """The config ``options`` make: a ``ServeConfig`` as given, ``simulate``'s keywords folded as ``simulate`` folds them."""
    return options if isinstance(options, ServeConfig) else SimulationConfig.from_options(**options)


def option_fields(config: SimulationConfig | ServeConfig) -> dict[str, Any]:
    """Every option as the config holds it (defaults filled in, names made canonical); a launch file by its content."""
    folded = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
    for name in _FILE_OPTIONS:
        if folded.get(name) is not None:
            folded[name] = Path(folded[name])
    if folded.get("vae") is not None:  # a VAE folder by its config's content
        folded["vae"] = Path(folded["vae"]) / "config.json"
    return folded


def model_content(model: ModelSource, *, trust_remote_code: bool = False) -> dict[str, Any]:
    """What the model is, apart from its name: a config's every field, a pipeline folder's or a builder file's
    bytes. A model object or a function raises ``Unkeyable`` (its weights and code are not written out)."""
    if isinstance(model, PretrainedConfig):
        return {"config": _config(model)}
    if not isinstance(model, (str, Path)):
        raise Unkeyable(type(model).__name__)
    index = pipeline_index(model)
    if index is not None:
        files = sorted(index.folder.rglob("*.json"))
        return {"pipeline": {str(file.relative_to(index.folder)): _file_digest(file) for file in files}}
    path_text, sep, function = str(model).rpartition(":")
    if sep and path_text.endswith(".py"):
        path, function = user_function_file(str(model))
        return {"builder": function, "file": _file_digest(path)}
    return {"config": _config(load_config(model, trust_remote_code=trust_remote_code))}


def _config(config: PretrainedConfig) -> dict[str, Any]:
    """Every field of a transformers config, as its own JSON writes it, and its class."""
    try:
        text = config.to_json_string(use_diff=False)
    except (TypeError, ValueError) as exc:
        raise Unkeyable("a config field") from exc
    return {"class": f"{type(config).__module__}.{type(config).__qualname__}", "fields": json.loads(text)}


def canonical(value: Any, *, stand_in: StandIn | None = None) -> Any:
    """``value`` as JSON data that only an equal value writes: decimals exact and normalised (``2.50`` is ``2.5``),
    a ``Path`` by its file's content, a library's callable by name, a user's module-level function by its file.
    A part that cannot be written out exactly raises ``Unkeyable``, or is written as ``stand_in`` gives it."""
    try:
        return _written(value, stand_in)
    except Unkeyable:
        if stand_in is None:
            raise
        return {"stand_in": stand_in(value)}


def _written(value: Any, stand_in: StandIn | None) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value  # a StrEnum is its text
    if isinstance(value, float):
        return repr(value)  # nan and inf too
    if isinstance(value, Decimal):
        return {"decimal": format(value.normalize(), "f") if value.is_finite() else str(value)}
    if isinstance(value, Path):
        return {"file": _file_digest(value)}
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, enum.Enum):
        return {"enum": f"{type(value).__qualname__}.{value.name}"}
    if isinstance(value, Mapping):
        return {
            "map": {
                json.dumps(canonical(key, stand_in=stand_in), sort_keys=True): canonical(item, stand_in=stand_in)
                for key, item in value.items()
            }
        }
    if isinstance(value, (list, tuple)):
        return [canonical(item, stand_in=stand_in) for item in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(json.dumps(canonical(item, stand_in=stand_in), sort_keys=True) for item in value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"class": _qualified(type(value)), "fields": canonical(fields, stand_in=stand_in)}
    if callable(getattr(value, "to_dict", None)) and not isinstance(value, type):
        return {"class": _qualified(type(value)), "fields": canonical(value.to_dict(), stand_in=stand_in)}
    if callable(value):
        return _callable(value)
    raise Unkeyable(type(value).__name__)


def _callable(value: Any) -> dict[str, Any]:
    """A library's function or class by its qualified name; the user's own module-level function by its name and
    its file's content (a lambda, a nested function or a closure cannot be written out: unkeyable)."""
    module, qualname = getattr(value, "__module__", None) or "", getattr(value, "__qualname__", None) or "<>"
    if module.partition(".")[0] in _OWN_MODULES and "<" not in qualname:
        return {"callable": f"{module}.{qualname}"}
    code = getattr(value, "__code__", None)
    if isinstance(value, types.FunctionType) and value.__closure__ is None and "<" not in qualname and code is not None:
        file = Path(code.co_filename)
        if file.is_file():
            return {"function": qualname, "file": _file_digest(file)}
    raise Unkeyable(f"the callable {qualname}")


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes; a file that cannot be read makes the request unkeyable (the trace then says why)."""
    try:
        return hashlib.sha256(path.expanduser().read_bytes()).hexdigest()
    except OSError as exc:
        raise Unkeyable(str(path)) from exc


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _own_source() -> str:
    """SHA-256 of vramsim's own Python files: a source tree edited under one version number is another vramsim."""
    from vramsim import estimators, tracer

    digest = hashlib.sha256()
    for folder in (Path(__file__).parents[1], *(Path(package.__file__ or "").parent for package in (tracer, estimators))):
        for file in sorted(Path(folder).rglob("*.py")):
            digest.update(f"{file.relative_to(folder)}\0".encode() + file.read_bytes())
    return digest.hexdigest()


def _host() -> dict[str, Any]:
    """What the CPU kernel rules read from this machine (``tracer/kernels/``): threads and the CPU's ISA."""
    return {
        "platform": [sys.platform, platform.machine()],
        "threads": torch.get_num_threads(),
        "cpu": torch._C._cpu._get_cpu_capability(),
        "mkldnn": [torch.backends.mkldnn.is_available(), bool(torch.backends.mkldnn.enabled)],
    }
