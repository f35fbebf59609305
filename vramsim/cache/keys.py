"""A request's key: the SHA-256 of everything its answer depends on, written out canonically.

What goes in: the kind of answer (``simulate``, ``plan``...), the model as given and its content (a config's every
field; a pipeline folder's or a builder file's bytes), every ``simulate`` option folded into ``SimulationConfig``'s
fields (defaults filled in, names made canonical, launch files' content), the caller's further parts (a price
sheet's content, a duration), vramsim's version and its own source, the versions of the libraries whose code runs
in the trace, and what the host's CPU kernels read (threads, ISA). A part that cannot be written out exactly (a
model object, a lambda, a closure, trust_remote_code's own code) makes the request unkeyable: it is traced.
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
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from transformers import PretrainedConfig

from vramsim.config import SimulationConfig
from vramsim.config.user_files import user_function_file
from vramsim.workload.models import ModelSource, load_config, model_name, pipeline_index

__all__ = ["LIBRARIES", "request_key"]

LIBRARIES = ("torch", "transformers", "diffusers", "peft", "accelerate", "bitsandbytes", "torchao")
"""The distributions whose code runs in a trace; a key holds each one's installed version (``None``: not installed)."""

_FILE_OPTIONS = ("deepspeed", "accelerate_config")
"""Options naming a file whose content the answer reads."""

_OWN_MODULES = frozenset(("vramsim", *LIBRARIES))
"""Top-level modules a callable from which is named by its qualified name (their versions are in the key)."""


class _Unkeyable(Exception):
    """A part of the request that cannot be written out exactly."""


def request_key(kind: str, model: ModelSource, options: Mapping[str, Any], **parts: Any) -> str | None:
    """The key of asking ``kind`` of ``model`` with ``simulate``'s ``options`` and the further ``parts`` (a
    ``Path`` stands for its file's content): 64 hex digits, or ``None`` where the request cannot be keyed.

    A bad option raises the ``ConfigError`` that ``simulate`` would, and an unknown model its
    ``ModelNotFoundError``.

    >>> request_key("simulate", "gpt2", {"task": "train"}) == request_key("simulate", "gpt2", {"task": "train", "batch_size": 1})
    True
    """
    config = SimulationConfig.from_options(**options)
    folded = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
    for name in _FILE_OPTIONS:
        folded[name] = None if folded[name] is None else Path(folded[name])
    try:
        request = {
            "kind": kind,
            "model": _model(model, trust_remote_code=config.trust_remote_code),
            "options": _canonical(folded),
            "parts": _canonical(parts),
            "vramsim": [_version("vramsim"), _own_source()],
            "libraries": {name: _version(name) for name in LIBRARIES},
            "host": _host(),
        }
    except _Unkeyable:
        return None
    text = json.dumps(request, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _model(model: ModelSource, *, trust_remote_code: bool) -> dict[str, Any]:
    """The model as given (its name is the report's) and its content."""
    if trust_remote_code:
        raise _Unkeyable("the model's own code")
    named: dict[str, Any] = {"name": model_name(model)}
    if isinstance(model, PretrainedConfig):
        return named | {"config": _config(model)}
    if not isinstance(model, (str, Path)):
        raise _Unkeyable(type(model).__name__)
    index = pipeline_index(model)
    if index is not None:
        files = sorted(index.folder.rglob("*.json"))
        return named | {"pipeline": {str(file.relative_to(index.folder)): _file_digest(file) for file in files}}
    path_text, sep, function = str(model).rpartition(":")
    if sep and path_text.endswith(".py"):
        path, function = user_function_file(str(model))
        return named | {"builder": function, "file": _file_digest(path)}
    return named | {"config": _config(load_config(model))}


def _config(config: PretrainedConfig) -> dict[str, Any]:
    """Every field of a transformers config, as its own JSON writes it, and its class."""
    try:
        text = config.to_json_string(use_diff=False)
    except (TypeError, ValueError) as exc:
        raise _Unkeyable("a config field") from exc
    return {"class": f"{type(config).__module__}.{type(config).__qualname__}", "fields": json.loads(text)}


def _canonical(value: Any) -> Any:
    """``value`` as JSON data that only an equal value writes."""
    if value is None or isinstance(value, (bool, int, str)):
        return value  # a StrEnum is its text
    if isinstance(value, float):
        return repr(value)  # nan and inf too
    if isinstance(value, Path):
        return {"file": _file_digest(value)}
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, enum.Enum):
        return {"enum": f"{type(value).__qualname__}.{value.name}"}
    if isinstance(value, Mapping):
        return {"map": {json.dumps(_canonical(key), sort_keys=True): _canonical(item) for key, item in value.items()}}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(json.dumps(_canonical(item), sort_keys=True) for item in value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"class": _qualified(type(value)), "fields": _canonical(fields)}
    if callable(getattr(value, "to_dict", None)) and not isinstance(value, type):
        return {"class": _qualified(type(value)), "fields": _canonical(value.to_dict())}
    if callable(value):
        return _callable(value)
    raise _Unkeyable(type(value).__name__)


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
    raise _Unkeyable(f"the callable {qualname}")


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes; a file that cannot be read makes the request unkeyable (the trace then says why)."""
    try:
        return hashlib.sha256(path.expanduser().read_bytes()).hexdigest()
    except OSError as exc:
        raise _Unkeyable(str(path)) from exc


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
