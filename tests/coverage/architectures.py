"""The architectures the coverage test traces, and how each is made small enough for CI.

Beside transformers' default configs, each family of the bundled configs (model_zoo) is traced from a real
bundled config of its own (``bundled_cases``): a training step and, for a head that decodes, a generate step,
on h100, its layers capped as below.

Every architecture of the mappings below is built from its default config
(``AutoConfig.for_model(model_type)``), with two changes that do not change which ops run:

- repeated layers are capped at ``MAX_LAYERS``, keeping one layer of each kind a hybrid model
  mixes (``layer_types`` and other per-layer lists are cut to the same layers, periodic
  patterns keep their first period);
- a head class whose config is a sub-config of the default one (e.g. ``Llama4ForCausalLM`` on
  ``Llama4TextConfig``) is built from that sub-config, as ``from_pretrained`` does.

Where a default config leaves unset (None) a size the model needs, the value its code would
derive is filled in (``head_dim = hidden_size // num_attention_heads``, ``num_key_value_heads =
num_attention_heads``, ``layer_types`` all full attention, RoPE theta 10000 per layer type),
and unset MoE sizes become 8 experts, top-2; a Gemma 3 projector whose patch side does not
pool to ``mm_tokens_per_image`` (the default config's 14 patches to 16) gets one token per
patch; a causal-LM head of an encoder architecture gets ``is_decoder=True``, as its docs
require. ``SEQ_LENS`` lists the models that train only at one length; image + text models
with placeholder tokens train at ``IMAGE_TEXT_SEQ_LEN``, room for their image.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import warnings
from typing import Any

import transformers
from transformers import AutoConfig, PretrainedConfig
from transformers.models.auto import modeling_auto

import vramsim
from vramsim.model_zoo import find, model_ids
from vramsim.model_zoo.entries import model_entries
from vramsim.workload.image_text_inputs import splices_image

MAPPINGS: dict[str, dict[str, str]] = {
    "causal-lm": dict(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
    "masked-lm": dict(modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
    "seq2seq-lm": dict(modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES),
    "image-classification": dict(modeling_auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES),
    "speech-seq2seq": dict(modeling_auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES),
    "ctc": dict(modeling_auto.MODEL_FOR_CTC_MAPPING_NAMES),
}
"""transformers' Auto mappings: model_type -> head class name."""

TARGETS = ("h100", "cpu")
MAX_LAYERS = 2
SEQ_LEN = 16
BATCH_SIZE = 2
"""Two samples: batch norm refuses to train on one."""
AUDIO_SEQ_LEN = 128
"""Audio frames: convolutional front ends subsample 4-8x and need a few frames left."""
AUDIO_MAPPINGS = ("speech-seq2seq", "ctc")

_LAYER_COUNTS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "depth",
    "num_blocks",
    "num_layers_per_stack",
)
SEQ_LENS = {"reformer": 4096}
"""Reformer's axial position embeddings train only at their full length (64 x 64)."""
IMAGE_TEXT_SEQ_LEN = 320
"""Image + text models fed a spliced image (``vramsim.workload.image_text_inputs``): one image's block (256
placeholders and markers for GOT-OCR2, 196 + 4 for Gemma 3) and some text."""
_MIN_LAYERS = {"zamba": 11}
"""Model types whose layers share weights across a period: two periods are kept."""
_PERIODS = (("attn_layer_period", "attn_layer_offset"), ("expert_layer_period", "expert_layer_offset"))


def cases() -> list[tuple[str, str, str, str]]:
    """``(mapping, model_type, class_name, target)`` for every architecture of every mapping (the first
    class where a mapping lists several), the targets taken in turn: each architecture is traced on one,
    each target on half of every mapping (both on all of them doubled the sweep's time, CI's largest part)."""
    return [
        (mapping, model_type, name if isinstance(name, str) else name[0], TARGETS[index % len(TARGETS)])
        for mapping, table in MAPPINGS.items()
        for index, (model_type, name) in enumerate(sorted(table.items()))
    ]


BUNDLED_TARGET = "h100"
BUNDLED_MAPPINGS = {"train": "bundled-train", "generate": "bundled-generate"}
"""The sweep's row name of each task a bundled family is traced for."""
MAX_NEW_TOKENS = 2
"""A prefill and a decode step: the generate program's two kinds of forward."""


def bundled_cases() -> list[tuple[str, str, str, str]]:
    """``(mapping, model_type, model_id, target)``: each bundled family (config.json's ``model_type``) by its
    first bundled id, for a training step and, where its head decodes, a generate step."""
    first: dict[str, tuple[str, bool]] = {}
    for entry in model_entries():
        first.setdefault(entry.family, (entry.model_id, entry.generates))
    return [
        (BUNDLED_MAPPINGS[task], family, model_id, BUNDLED_TARGET)
        for family, (model_id, generates) in sorted(first.items())
        for task in ("train", "generate")
        if task == "train" or generates
    ]


def trace_bundled(model_id: str, task: str) -> vramsim.Report:
    """One training step (batch 2) or one generate call (batch 1, ``MAX_NEW_TOKENS``) of the bundled config of
    ``model_id``, its layers capped, on ``BUNDLED_TARGET``."""
    folder = find(model_id)
    assert folder is not None and model_id in model_ids(), f"{model_id} is not bundled"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.from_pretrained(folder)
        _cap(config, set(), MAX_LAYERS)
        class_name = config.architectures[0]
        if not hasattr(transformers, class_name):  # a remote-code name (PhiMoEForCausalLM): transformers' own class
            class_name = MAPPINGS["causal-lm"][config.model_type]
        seq_len = AUDIO_SEQ_LEN if config.model_type == "whisper" else SEQ_LEN
        if "pixel_values" in inspect.signature(getattr(transformers, class_name).forward).parameters and splices_image(config):
            seq_len = IMAGE_TEXT_SEQ_LEN
        options: dict[str, Any] = (
            {"steps": 1, "batch_size": BATCH_SIZE} if task == "train" else {"max_new_tokens": MAX_NEW_TOKENS}
        )
        return vramsim.simulate(config, model_class=class_name, task=task, seq_len=seq_len, device=BUNDLED_TARGET, **options)


def small_config(model_type: str, class_name: str, *, capped: bool = True) -> PretrainedConfig:
    """The default config of ``model_type`` for ``class_name``, with its layers capped (all of them with
    ``capped=False``: the full-size default, as ``benchmarks/full_size.py`` times it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(model_type)
    config = _config_for(config, class_name)
    if capped:
        _cap(config, set(), _MIN_LAYERS.get(model_type, MAX_LAYERS))
    _repair(config, set())
    if class_name.endswith(("ForCausalLM", "LMHeadModel", "WithLMHead")) and getattr(config, "is_decoder", None) is False:
        config.is_decoder = True
    return config


def trace(model_type: str, class_name: str, device: str, mapping: str = "", *, capped: bool = True) -> vramsim.Report:
    """One training step of the architecture on ``device`` (``steps=1``: a second step runs the same ops, and
    the sweep asks only whether they trace; the ground truth checks steady states).

    A head that returns no loss (its ``forward`` takes no ``labels``, or, like ShieldGemma 2's,
    drops it) is trained on the mean of its first output, through ``simulate``'s ``loss=``.
    """
    config = small_config(model_type, class_name, capped=capped)
    cls = getattr(transformers, class_name)
    seq_len = SEQ_LENS.get(model_type, AUDIO_SEQ_LEN if mapping in AUDIO_MAPPINGS else SEQ_LEN)
    if "pixel_values" in inspect.signature(cls.forward).parameters and splices_image(config):
        seq_len = IMAGE_TEXT_SEQ_LEN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return vramsim.simulate(
            config,
            model_class=class_name,
            task="train",
            batch_size=BATCH_SIZE,
            seq_len=seq_len,
            device=device,
            loss=_loss,
            steps=1,
        )


def _loss(outputs: Any) -> Any:
    loss = getattr(outputs, "loss", None)
    return loss if loss is not None else _mean_of_first_output(outputs)


def _mean_of_first_output(outputs: Any) -> Any:
    first = outputs[0] if isinstance(outputs, (tuple, list)) else next(iter(outputs.values()))
    return first.float().mean()


def _repair(config: PretrainedConfig, seen: set[int]) -> None:
    """Fill sizes a default config leaves None with what the model's code would derive."""
    if id(config) in seen:
        return
    seen.add(id(config))
    for value in list(vars(config).values()):
        if isinstance(value, PretrainedConfig):
            _repair(value, seen)
    attrs = vars(config)
    heads, hidden = attrs.get("num_attention_heads"), attrs.get("hidden_size")
    if "head_dim" in attrs and attrs["head_dim"] is None and isinstance(heads, int) and isinstance(hidden, int):
        config.head_dim = hidden // heads
    if "num_key_value_heads" in attrs and attrs["num_key_value_heads"] is None and isinstance(heads, int):
        config.num_key_value_heads = heads
    for key in ("n_routed_experts", "num_experts", "num_local_experts"):
        if key in attrs and attrs[key] is None:
            setattr(config, key, 8)
    if "num_experts_per_tok" in attrs and attrs["num_experts_per_tok"] is None:
        config.num_experts_per_tok = 2
    rope = attrs.get("rope_parameters")
    if "layer_types" in attrs and attrs["layer_types"] is None and isinstance(attrs.get("num_hidden_layers"), int):
        config.layer_types = ["full_attention"] * attrs["num_hidden_layers"]
    if rope == {} and isinstance(attrs.get("layer_types"), list):
        config.rope_parameters = {kind: {"rope_type": "default", "rope_theta": 10000.0} for kind in set(attrs["layer_types"])}
    tokens, vision = attrs.get("mm_tokens_per_image"), attrs.get("vision_config")
    if isinstance(tokens, int) and vision is not None:  # Gemma 3 pools a side of patches to sqrt(tokens)
        side = vision.image_size // vision.patch_size
        if side % int(tokens**0.5):
            config.mm_tokens_per_image = side * side
    if "n_shared_experts" in attrs and attrs["n_shared_experts"] is None:
        config.n_shared_experts = 1
    if "vocab_size" in attrs and attrs["vocab_size"] is None:  # a template without a tokenizer (ESM)
        config.vocab_size = 64
        if attrs.get("pad_token_id", 0) is None:
            config.pad_token_id = 1


def _config_for(config: PretrainedConfig, class_name: str) -> PretrainedConfig:
    cls = getattr(transformers, class_name, None)
    wanted = getattr(cls, "config_class", None)
    if wanted is None or isinstance(config, wanted):
        return config
    for value in vars(config).values():
        if isinstance(value, wanted):
            return copy.deepcopy(value)
    return config


def _cap(config: PretrainedConfig, seen: set[int], least: int) -> None:
    if id(config) in seen:
        return
    seen.add(id(config))
    for value in list(vars(config).values()):
        if isinstance(value, PretrainedConfig):
            _cap(value, seen, least)
    attrs = vars(config)
    for key in _LAYER_COUNTS:
        count = attrs.get(key)
        if not isinstance(count, int) or isinstance(count, bool) or count <= least:
            continue
        keep = _layers_to_keep(config, count, least)
        shared = attrs.get("num_kv_shared_layers")
        for name, value in list(attrs.items()):
            if _layer_indices(name, value, count):
                setattr(config, name, type(value)(keep.index(i) for i in value if i in keep))
            elif _layer_sources(name, value, count):
                setattr(config, name, type(value)(keep.index(value[i]) for i in keep))
            elif _per_layer(name, value, count):
                picked = [value[i] for i in keep]
                setattr(config, name, "".join(picked) if isinstance(value, str) else type(value)(picked))
        if isinstance(shared, int) and shared > 0:
            config.num_kv_shared_layers = sum(i >= count - shared for i in keep)
        setattr(config, key, len(keep))


def _layer_indices(name: str, value: Any, count: int) -> bool:
    """A list of layer indices (``moe_layers = [1, 3, 5]``), as opposed to a value per layer."""
    return (
        any(word in name for word in ("layer", "idx", "indices"))
        and isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < count for v in value)
        and all(a < b for a, b in itertools.pairwise(value))
        and (len(value) < count or list(value) == list(range(count)))
    )


def _layer_sources(name: str, value: Any, count: int) -> bool:
    """A layer index per layer, each the layer itself or an earlier one (``kv_source_layers``: the layer whose keys
    and values it reads): kept layers keep their source, renumbered."""
    return (
        "layer" in name
        and isinstance(value, (list, tuple))
        and len(value) == count
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= i for i, v in enumerate(value))
        and any(v != i for i, v in enumerate(value))
    )


def _per_layer(name: str, value: Any, count: int) -> bool:
    if isinstance(value, str):
        return "pattern" in name and len(value) == count
    return isinstance(value, (list, tuple)) and len(value) == count


def _layers_to_keep(config: PretrainedConfig, count: int, least: int) -> list[int]:
    """The first layer of each kind (per-layer lists, periodic patterns, KV-sharing region), at least ``least``, and
    the layer each kept one reads its keys and values from."""
    attrs = vars(config)
    sources = [v for k, v in attrs.items() if _layer_sources(k, v, count)]
    per_layer = [
        v
        for k, v in attrs.items()
        if _per_layer(k, v, count) and not _layer_indices(k, v, count) and not _layer_sources(k, v, count)
    ]
    per_layer += [[i in set(v) for i in range(count)] for k, v in attrs.items() if _layer_indices(k, v, count)]
    per_layer += [[v[i] == i for i in range(count)] for v in sources]  # its own keys and values, or another's
    shared = attrs.get("num_kv_shared_layers")
    if isinstance(shared, int) and 0 < shared < count:
        per_layer.append(["own"] * (count - shared) + ["shared"] * shared)
    needed = least
    for name, value in attrs.items():  # a repeating pattern shorter than the stack (RecurrentGemma)
        if name.endswith(("block_types", "_pattern")) and isinstance(value, (list, tuple)) and 0 < len(value) < count:
            needed = max(needed, len(value))
    for period, offset in _PERIODS:
        if isinstance(attrs.get(period), int) and isinstance(attrs.get(offset), int):
            needed = max(needed, attrs[offset] + 1)
    indices = attrs.get("attn_layer_indices")
    if isinstance(indices, (list, tuple)) and indices:
        needed = max(needed, min(indices) + 1)
    needed = min(needed, count)
    seen: set[Any] = set()
    keep: list[int] = []
    for i in range(count):
        kind = tuple(_hashable(v[i]) for v in per_layer)
        if kind not in seen or i < needed:
            seen.add(kind)
            keep.append(i)
    return sorted({*keep, *(v[i] for v in sources for i in keep)})


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
