"""Model resolution: an id, folder, config, module or builder -> an ``nn.Module`` on a device."""

from __future__ import annotations

import contextlib
import copy
import difflib
import functools
import importlib.util
import json
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import CONFIG_MAPPING, AutoConfig, PretrainedConfig

from vramsim import model_zoo
from vramsim.config.user_files import user_function_file
from vramsim.config.workload import DEFAULT_NEW_TOKENS, DEFAULT_SEQ_LEN, default_task
from vramsim.errors import ConfigError, ModelNotFoundError, TraceError, UnsupportedError, VramsimError, first_line
from vramsim.workload.guards import check_config
from vramsim.workload.positions import default_seq_len, short_positions

__all__ = [
    "ModelSource",
    "PipelineIndex",
    "build_model",
    "call_user",
    "load_config",
    "loads_checkpoint_dtype",
    "meta_copy",
    "model_name",
    "pipeline_index",
    "with_default_task",
    "with_model_defaults",
]

ModelSource = str | Path | PretrainedConfig | torch.nn.Module | Callable[[], torch.nn.Module]


def model_name(model: ModelSource) -> str:
    """The name a result gives its model: the id or path as given, else the class or config's own name."""
    if isinstance(model, str):
        return model
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "name_or_path", None) or getattr(model, "__name__", None) or type(model).__name__


@dataclass(frozen=True, slots=True)
class PipelineIndex:
    """A diffusion pipeline's folder and its ``model_index.json``, read without importing diffusers."""

    folder: Path
    index: dict[str, Any]
    """model_index.json as published."""


def pipeline_index(source: object) -> PipelineIndex | None:
    """A bundled pipeline id or a folder with ``model_index.json``: its index; None for anything else, so a single
    model's run never loads the diffusion package."""
    if not isinstance(source, (str, Path)):
        return None
    text = str(source)
    folder = model_zoo.find_pipeline(text) or Path(text).expanduser()
    index_file = folder / "model_index.json"
    if not index_file.is_file():
        return None
    try:
        index = json.loads(index_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelNotFoundError(f"{index_file} is not a readable model_index.json", quoted=first_line(exc)) from exc
    return PipelineIndex(folder=folder, index=index)


def with_default_task(source: object, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with a task where none is given: ``config.workload.default_task`` (``generate`` for a diffusion
    pipeline, ``task="train"`` trains its denoiser; ``train`` for a model)."""
    if options.get("task") is not None:
        return options
    return {**options, "task": default_task(source)}


def with_model_defaults(source: ModelSource, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the model's defaults where none are given: the task (``with_default_task``) and the sequence
    length, ``DEFAULT_SEQ_LEN`` or what a shorter learned position table holds (``positions.default_seq_len``)."""
    options = with_default_task(source, options)
    if options.get("seq_len") is not None:
        return options
    options = {key: value for key, value in options.items() if key != "seq_len"}
    if options.get("inputs") is not None or pipeline_index(source) is not None:
        return options | {"seq_len": DEFAULT_SEQ_LEN}
    new_tokens = options.get("max_new_tokens")
    new_tokens = new_tokens if new_tokens is not None else DEFAULT_NEW_TOKENS if options["task"] == "generate" else 0
    if isinstance(source, torch.nn.Module):
        return options | {"seq_len": default_seq_len(source, new_tokens=new_tokens)}
    if (isinstance(source, (str, Path)) and load_builder(str(source)) is None) or isinstance(source, PretrainedConfig):
        trust = bool(options.get("trust_remote_code"))
        config = copy.deepcopy(source) if isinstance(source, PretrainedConfig) else load_config(source, trust_remote_code=trust)
        if short_positions(config, new_tokens=new_tokens):  # only then built, to see whether its table is learned
            model = build_model(
                config,
                device="meta",
                dtype=None,
                model_class=options.get("model_class"),
                trust_remote_code=trust,
                task=options["task"],
                attn_implementation=options.get("attn_implementation"),
            )
            return options | {"seq_len": default_seq_len(model, new_tokens=new_tokens)}
    return options | {"seq_len": DEFAULT_SEQ_LEN}


def load_builder(source: str) -> Callable[[], torch.nn.Module] | None:
    """``path/to/model.py:build_fn`` -> that function, imported from the user's own file; else None."""
    path_text, sep, _ = source.rpartition(":")
    if not sep and source.endswith(".py"):
        raise ModelNotFoundError(f"{source} is Python: name the function that builds the model, {source}:build_fn")
    if not sep or not path_text.endswith(".py"):
        return None
    return load_function(source, "def {name}() -> torch.nn.Module")


def load_function(source: str, signature: str) -> Callable[..., Any]:
    """``path/to/file.py:name`` -> that function, imported from the user's own file.

    ``signature`` (with ``{name}``) is what the error asks the user to define when it is missing.
    """
    path, name = user_function_file(source)
    spec = importlib.util.spec_from_file_location(f"vramsim_user_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ModelNotFoundError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's own code: any failure is theirs to see, in one line
        where = f"{exc.filename}:{exc.lineno}: " if isinstance(exc, SyntaxError) else _user_frame(exc)
        raise ModelNotFoundError(f"importing {path} failed", quoted=f"{where}{type(exc).__name__}: {first_line(exc)}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise ModelNotFoundError(f"{path} has no callable {name!r}; define {signature.format(name=name)}")
    return function


def load_config(source: str | Path, *, trust_remote_code: bool = False) -> PretrainedConfig:
    """Resolve an id or path to a config: the zoo first, then a local path, then the Hub."""
    text = str(source)
    zoo_folder = model_zoo.find(text)
    path = Path(zoo_folder) if zoo_folder is not None else Path(text).expanduser()
    if path.exists():
        return _config_from_path(path, trust_remote_code=trust_remote_code)
    online = _hub_reachable()
    if not trust_remote_code:  # config.json alone first, so its own code is named as a folder's is
        with _hub_errors(text, online):
            data, _ = PretrainedConfig.get_config_dict(text, local_files_only=not online)
        _refuse_own_code(repr(text), data)
    with _hub_errors(text, online):
        return AutoConfig.from_pretrained(text, trust_remote_code=trust_remote_code, local_files_only=not online)


@contextlib.contextmanager
def _hub_errors(text: str, online: bool) -> Iterator[None]:
    """What fetching ``text``'s config from the Hub (or its cache) raises, as one line naming the id."""
    try:
        yield
    except OSError as exc:
        where = (
            f"reachable on the Hugging Face Hub ({first_line(exc)})"
            if online
            else ("in the Hugging Face cache, and the Hub cannot be reached (offline)")
        )
        close = _close_ids(text)
        hint = f"did you mean {close[0] if len(close) == 1 else ', '.join(close[:-1]) + ' or ' + close[-1]}? " if close else ""
        raise ModelNotFoundError(
            f"{text!r} is neither a bundled model (see `vramsim models`) nor {where}; "
            f"{hint}pass a local folder or a config.json path instead"
        ) from exc
    except ValueError as exc:
        raise ModelNotFoundError(f"cannot load the config of {text!r}", quoted=first_line(exc)) from exc


_HUB_PROBE_SECONDS = 3.0
"""How long vramsim's one look at the Hub waits: offline, huggingface_hub retries a request five
times with backoff (about 27 s, a warning line each), and offers no setting to retry less."""


def _hub_reachable() -> bool:
    """One request to the Hub's endpoint without retries (proxies from the environment honoured);
    ``HF_HUB_OFFLINE=1`` says offline without asking. Offline, configs come from the local cache."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    try:
        urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=_HUB_PROBE_SECONDS).close()
    except urllib.error.HTTPError:
        return True  # it answered
    except (OSError, ValueError):
        return False
    return True


def _close_ids(text: str) -> list[str]:
    """Bundled ids that look like ``text``, by whole id or by the name after the organisation."""
    names: dict[str, str] = {}
    for model_id in (*model_zoo.model_ids(), *model_zoo.pipeline_ids(), *model_zoo.ALIASES):
        names.setdefault(model_id.lower(), model_id)
        names.setdefault(model_id.rpartition("/")[2].lower(), model_id)
    keys = [text.lower(), text.rpartition("/")[2].lower()]
    same = [names[key] for key in keys if key in names]  # the id in another case, or without its organisation
    close = same or [names[name] for key in keys for name in difflib.get_close_matches(key, names, n=3, cutoff=0.75)]
    return list(dict.fromkeys(close))[:3]


DTYPE_KEYWORD = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
"""What ``from_config`` calls the weights' dtype: transformers 4 (4.42, the oldest vramsim runs on) reads
``torch_dtype`` and passes an unknown ``dtype`` on to the model's ``__init__``."""


@functools.cache
def loads_checkpoint_dtype() -> bool:
    """Whether the installed transformers' ``from_pretrained`` loads a checkpoint in its config's dtype when the
    script passes none (transformers 5 defaults to ``dtype="auto"``), rather than in torch's default dtype
    (transformers 4): found by loading a one-weight model whose config says bfloat16, so it is the installed
    version's own behaviour, not a guess from its number."""
    from transformers.utils import logging

    class _OneWeight(transformers.PreTrainedModel):
        config_class = PretrainedConfig

        def __init__(self, config: PretrainedConfig) -> None:
            super().__init__(config)
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.post_init()

    config = PretrainedConfig()
    setattr(config, DTYPE_KEYWORD, torch.bfloat16)
    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # "Loading weights" for one weight
    try:
        loaded = _OneWeight.from_pretrained(None, config=config, state_dict={"weight": torch.zeros(1, dtype=torch.bfloat16)})
    finally:
        if shown:
            logging.enable_progress_bar()
    return loaded.weight.dtype == torch.bfloat16


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
        module = meta_copy(source) if device == "meta" else source
        return module.to(dtype) if dtype is not None else module
    if callable(source) and not isinstance(source, PretrainedConfig):
        with torch.device(device):
            module = call_user(source)
        if not isinstance(module, torch.nn.Module):
            raise ConfigError(f"the model builder returned {type(module).__name__}, not a torch.nn.Module")
        if device == "meta" and _off_meta(module):
            module.to("meta")  # tensors the builder placed on a device explicitly; ours to move
        return module.to(dtype) if dtype is not None else module
    config = source if isinstance(source, PretrainedConfig) else load_config(source, trust_remote_code=trust_remote_code)
    check_config(config)
    model_cls = _model_class(config, model_class, task, trust_remote_code=trust_remote_code)
    options: dict[str, Any] = {DTYPE_KEYWORD: dtype or torch.float32}
    if attn_implementation is not None:
        options["attn_implementation"] = attn_implementation
    try:
        with torch.device(device):
            if hasattr(model_cls, "from_config"):  # an Auto class, which may load the Hub repo's own code
                model = model_cls.from_config(config, trust_remote_code=trust_remote_code, **options)
            else:
                model = model_cls._from_config(config, **options)
    except ValueError as exc:
        # transformers' refusal: "X does not support Flash Attention 2 yet"
        if attn_implementation is not None and "does not support" in str(exc):
            raise UnsupportedError(f"attn_implementation={attn_implementation!r}", quoted=first_line(exc).split(". ")[0]) from exc
        raise TraceError(f"{model_cls.__name__} could not be built from its config", quoted=first_line(exc)) from exc
    except (TypeError, KeyError, AttributeError, RuntimeError, ArithmeticError) as exc:
        raise TraceError(f"{model_cls.__name__} could not be built from its config", quoted=first_line(exc)) from exc
    if device == "meta" and any(t.device.type != "meta" for t in (*model.parameters(), *model.buffers())):
        model.to("meta")  # some models create a tensor on the CPU explicitly; on meta it must hold no memory
    _untie_a_separately_stored_head(model)
    return model


def _untie_a_separately_stored_head(model: torch.nn.Module) -> None:
    """T5 v1.1 and its kin (Flan-T5, UMT5, LongT5) store an LM head apart from the embedding: their config.json
    says ``tie_word_embeddings: false``. From transformers 5 their configs force the flag to ``True`` and keep what
    the file said as ``scale_decoder_outputs``, so a model built from the config ties the two, while
    ``from_pretrained`` unties them again because the checkpoint holds both with different values. vramsim
    simulates the pretrained model: its head gets its own weight, as loading gives it."""
    head = getattr(model, "lm_head", None)
    if not isinstance(model, transformers.PreTrainedModel) or not isinstance(head, torch.nn.Linear):
        return
    if getattr(model.config, "scale_decoder_outputs", True) is False and head.weight is model.get_input_embeddings().weight:
        head.weight = torch.nn.Parameter(torch.empty_like(head.weight), requires_grad=head.weight.requires_grad)


def meta_copy(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` itself when it lives on meta; else a copy on meta, the user's model untouched.

    A model built on the CPU (``simulate(MyNet(), ...)``) is the user's: it is deep-copied with
    each parameter and buffer replaced by a meta tensor of its shape, so no weight is copied.
    """
    if not _off_meta(module):
        return module
    memo: dict[int, Any] = {}
    for tensor in (*module.parameters(), *module.buffers()):
        on_meta = tensor.detach().to("meta")
        if isinstance(tensor, torch.nn.Parameter):
            on_meta = torch.nn.Parameter(on_meta, requires_grad=tensor.requires_grad)
        memo[id(tensor)] = on_meta
    return copy.deepcopy(module, memo)


def _off_meta(module: torch.nn.Module) -> bool:
    return any(t.device.type != "meta" for t in (*module.parameters(), *module.buffers()))


def call_user(function: Callable[..., Any], *args: Any) -> Any:
    """Run the user's function (a builder, ``inputs=``); its failure is one line naming their file and line."""
    try:
        return function(*args)
    except VramsimError:
        raise
    except Exception as exc:  # the user's own code: any failure is theirs to see, in one line
        raise ConfigError(quoted=f"{_user_frame(exc)}{type(exc).__name__}: {first_line(exc)}") from exc


def _user_frame(exc: BaseException) -> str:
    """``file:line: `` of the innermost frame outside vramsim and torch, where the user's code failed."""
    frames = traceback.extract_tb(exc.__traceback__)
    from vramsim import estimators, tracer

    packages = (model_zoo, estimators, tracer, torch, transformers)
    ours = tuple(str(Path(package.__file__ or "").parent) for package in packages)
    ours += (str(Path(__file__).parent),)
    theirs = [f for f in frames if not f.filename.startswith(ours)]
    return f"{theirs[-1].filename}:{theirs[-1].lineno}: " if theirs else ""


def _config_from_path(path: Path, *, trust_remote_code: bool) -> PretrainedConfig:
    file = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelNotFoundError(f"{file} is not a readable config.json", quoted=first_line(exc)) from exc
    if not isinstance(data, dict) or "model_type" not in data:
        raise ModelNotFoundError(f"{file} has no 'model_type'; is it a Hugging Face config.json?")
    if not trust_remote_code:
        _refuse_own_code(str(path), data)
    try:
        return AutoConfig.from_pretrained(str(file.parent if path.is_dir() else file), trust_remote_code=trust_remote_code)
    except Exception as exc:  # transformers raises many kinds (validation, unknown model_type, ...)
        raise ModelNotFoundError(f"{file} cannot be loaded as a config", quoted=first_line(exc)) from exc


def _refuse_own_code(name: str, data: dict[str, Any]) -> None:
    """A ConfigError naming ``--trust-remote-code`` when the config's class is the repository's own code, as
    ``AutoConfig`` decides: an ``auto_map`` naming an ``AutoConfig`` for a ``model_type`` transformers does not know
    (transformers' own refusal is a paragraph asking for ``trust_remote_code=True``)."""
    auto_map = data.get("auto_map")
    if isinstance(auto_map, dict) and "AutoConfig" in auto_map and data.get("model_type") not in CONFIG_MAPPING:
        raise ConfigError(f"{name} has its own model code (config.json's auto_map); --trust-remote-code runs it")


_TASK_AUTO_CLASS = {"train": "AutoModelForCausalLM", "forward": "AutoModelForCausalLM", "generate": "AutoModelForCausalLM"}


def _model_class(config: PretrainedConfig, model_class: str | None, task: str, *, trust_remote_code: bool) -> Any:
    """The class the user named, else the config's own architecture, else the task's Auto class.

    An Auto class takes the repository's own code where the config's ``auto_map`` names it and the code
    is trusted (as ``from_config`` does), else transformers' class for the config's type: the task's
    first, then ``AutoModel``, then any other model class the ``auto_map`` offers.
    """
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
    offered = list(getattr(config, "auto_map", None) or {}) if trust_remote_code else []
    others = [name for name in offered if name.startswith("AutoModel")]
    for name in dict.fromkeys([_TASK_AUTO_CLASS[task], "AutoModel", *others]):
        auto = getattr(transformers, name, None)
        if auto is not None and (name in offered or type(config) in auto._model_mapping):
            return auto
    return transformers.AutoModel
