"""Model resolution: an id, folder, config, module or builder -> an ``nn.Module`` on a device."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, PretrainedConfig

from vramsim import model_zoo

from .errors import ConfigError, ModelNotFoundError, TraceError, UnsupportedError, first_line
from .guards import check_config

__all__ = ["ModelSource", "build_model", "load_config"]

ModelSource = str | Path | PretrainedConfig | torch.nn.Module | Callable[[], torch.nn.Module]


def load_builder(source: str) -> Callable[[], torch.nn.Module] | None:
    """``path/to/model.py:build_fn`` -> that function, imported from the user's own file; else None."""
    path_text, sep, name = source.rpartition(":")
    if not sep or not path_text.endswith(".py"):
        return None
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(f"{path} does not exist; pass path/to/model.py:build_fn")
    spec = importlib.util.spec_from_file_location(f"vramsim_user_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ModelNotFoundError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's own code: any failure is theirs to see, in one line
        raise ModelNotFoundError(f"importing {path} failed: {type(exc).__name__}: {first_line(exc)}") from exc
    builder = getattr(module, name, None)
    if not callable(builder):
        raise ModelNotFoundError(f"{path} has no callable {name!r}; define def {name}() -> torch.nn.Module")
    return builder


def load_config(source: str | Path, *, trust_remote_code: bool = False) -> PretrainedConfig:
    """Resolve an id or path to a config: the zoo first, then a local path, then the Hub."""
    text = str(source)
    zoo_folder = model_zoo.find(text)
    path = Path(zoo_folder) if zoo_folder is not None else Path(text).expanduser()
    if path.exists():
        return _config_from_path(path, trust_remote_code=trust_remote_code)
    try:
        return AutoConfig.from_pretrained(text, trust_remote_code=trust_remote_code)
    except OSError as exc:
        raise ModelNotFoundError(
            f"{text!r} is neither a bundled model (see `vramsim models`) nor reachable on the Hugging Face Hub "
            f"({first_line(exc)}); pass a local folder or a config.json path instead"
        ) from exc
    except ValueError as exc:
        raise ModelNotFoundError(f"cannot load the config of {text!r}: {first_line(exc)}") from exc


def build_model(
    source: ModelSource,
    *,
    device: str,
    dtype: torch.dtype | None,
    model_class: str | None = None,
    trust_remote_code: bool = False,
    task: str = "train",
    attn_implementation: str | None = None,
) -> torch.nn.Module:
    """Build the model with its weights on ``device`` (``meta`` for simulation, ``cpu`` to measure).

    ``attn_implementation`` is passed as ``from_pretrained(..., attn_implementation=...)`` passes
    it: transformers checks the model supports it and writes it into the config (sub-configs too).
    """
    if attn_implementation is not None and not isinstance(source, (str, Path, PretrainedConfig)):
        raise ConfigError(
            f"attn_implementation={attn_implementation!r} applies to a transformers model built from its config; "
            "a module or builder runs its own attention"
        )
    if isinstance(source, torch.nn.Module):
        return source.to(dtype) if dtype is not None else source
    if callable(source) and not isinstance(source, PretrainedConfig):
        with torch.device(device):
            module = source()
        if not isinstance(module, torch.nn.Module):
            raise ConfigError(f"the model builder returned {type(module).__name__}, not a torch.nn.Module")
        return module.to(dtype) if dtype is not None else module
    config = source if isinstance(source, PretrainedConfig) else load_config(source, trust_remote_code=trust_remote_code)
    check_config(config)
    model_cls = _model_class(config, model_class, task)
    attention = {"attn_implementation": attn_implementation} if attn_implementation is not None else {}
    try:
        with torch.device(device):
            if hasattr(model_cls, "from_config"):  # an Auto class, which may load the Hub repo's own code
                model = model_cls.from_config(
                    config, dtype=dtype or torch.float32, trust_remote_code=trust_remote_code, **attention
                )
            else:
                model = model_cls._from_config(config, dtype=dtype or torch.float32, **attention)
    except ValueError as exc:
        if attention and "does not support" in str(exc):  # transformers' refusal: "X does not support Flash Attention 2 yet"
            raise UnsupportedError(f"attn_implementation={attn_implementation!r}: {first_line(exc).split('. ')[0]}") from exc
        raise TraceError(f"{model_cls.__name__} could not be built from its config: {first_line(exc)}") from exc
    except (TypeError, KeyError, AttributeError, RuntimeError, ArithmeticError) as exc:
        raise TraceError(f"{model_cls.__name__} could not be built from its config: {first_line(exc)}") from exc
    if device == "meta" and any(t.device.type != "meta" for t in (*model.parameters(), *model.buffers())):
        model.to("meta")  # some models create a tensor on the CPU explicitly; on meta it must hold no memory
    return model


def _config_from_path(path: Path, *, trust_remote_code: bool) -> PretrainedConfig:
    file = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelNotFoundError(f"{file} is not a readable config.json: {first_line(exc)}") from exc
    if not isinstance(data, dict) or "model_type" not in data:
        raise ModelNotFoundError(f"{file} has no 'model_type'; is it a Hugging Face config.json?")
    try:
        return AutoConfig.from_pretrained(str(file.parent if path.is_dir() else file), trust_remote_code=trust_remote_code)
    except Exception as exc:  # transformers raises many kinds (validation, unknown model_type, ...)
        raise ModelNotFoundError(f"{file} cannot be loaded as a config: {first_line(exc)}") from exc


_TASK_AUTO_CLASS = {"train": "AutoModelForCausalLM", "forward": "AutoModelForCausalLM", "generate": "AutoModelForCausalLM"}


def _model_class(config: PretrainedConfig, model_class: str | None, task: str) -> Any:
    """The class the user named, else the config's own architecture, else the task's Auto class."""
    names = [model_class] if model_class else list(getattr(config, "architectures", None) or [])
    for name in names:
        cls = getattr(transformers, name, None)
        if cls is not None and (hasattr(cls, "from_config") or hasattr(cls, "_from_config")):
            return cls
        if model_class:
            raise ConfigError(
                f"unknown model class {model_class!r}; name a transformers class such as "
                "AutoModelForCausalLM, AutoModelForSequenceClassification or LlamaForCausalLM"
            )
    auto = getattr(transformers, _TASK_AUTO_CLASS[task])
    if type(config) in auto._model_mapping:
        return auto
    return transformers.AutoModel

