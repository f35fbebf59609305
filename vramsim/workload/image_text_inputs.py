"""Image + text batches for models that splice image features into placeholder tokens.

A model whose ``forward`` takes ``pixel_values`` and whose config names an image placeholder
token (LLaVA, LLaVA-NeXT, LLaVA-OneVision, Gemma 3, ShieldGemma 2, PaliGemma, GOT-OCR2,
Qwen2-VL / 2.5-VL / 3-VL, Idefics3, SmolVLM, Mllama, InternVL, Aria, Pixtral (a LLaVA with a
Pixtral tower), Mistral 3) is fed what its processor makes of one blank ``IMAGE_SIDE`` square
per sample:

- ``pixel_values`` and the other tensors the model type's image processor returns with its
  defaults (``image_grid_thw``, ``image_sizes``, ``pixel_attention_mask``, ``aspect_ratio_ids``
  / ``_mask``...), sized from the config where the processor resizes to a fixed size (the
  tower's side, its patch grid, the anyres grid); all of them with known values, which the
  program may read (Idefics3 drops all-zero tiles by reading ``pixel_values``);
- the text of ``seq_len`` tokens in all: first the image's block as the processor writes it
  (the placeholder run, with the family's markers: start / end tokens, Idefics3's tile tags,
  Pixtral's row breaks, Mllama's bos), then ordinary random tokens. A block longer than
  ``seq_len`` is refused; markers the config has no id for are ordinary tokens;
- ``token_type_ids`` / ``mm_token_type_ids`` where ``forward`` takes them (1 on image tokens;
  PaliGemma's prefix-LM types mark the text after the image as the suffix) and Mllama's
  ``cross_attention_mask``;
- training labels: the ids with the placeholders masked to -100, as the training scripts do.

The placeholder count per image follows each processor (``_FAMILIES`` cites the source). Other
families with placeholders are fed their text only, as before (pass ``inputs=`` to add the image).
An image classifier fed this way (ShieldGemma 2) gets no labels: its ``labels`` go to its LM.

Known limitation: the tracer keeps values of tensors up to ``SHADOW_LIMIT`` elements
(``tracer/data_dependent/``), and Idefics3 / SmolVLM read their tiles' pixel values, so only
small pictures trace (a hub SmolVLM's 17 tiles of 512 px are 13M values: refused).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from vramsim.errors import UnsupportedError
from vramsim.tracer.data_dependent import seed

__all__ = ["IMAGE_SIDE", "SplicedImage", "spliced_image", "splices_image"]

IMAGE_SIDE = 448
"""Side of the synthesised (blank, square) picture before its processor resizes it. Fixed-size
processors (LLaVA, Gemma 3, PaliGemma, Mllama tiles) make the same tensors for any picture;
Qwen2-VL keeps this size (a 32 x 32 grid of 14-pixel patches); Idefics3 upscales it to its
longest edge and tiles it."""

IGNORE_INDEX = -100
"""Label value the losses skip (``torch.nn.CrossEntropyLoss(ignore_index=-100)``)."""

Block = list[int | None]
"""One image's token ids as its processor writes them; None where it writes ordinary text."""


@dataclass(frozen=True, slots=True)
class SplicedImage:
    """One image per sample: the processor's tensors and the image's block of text tokens."""

    block: Block
    placeholder: int
    tensors: dict[str, torch.Tensor]
    """What the image processor returned (CPU), kept where ``forward`` takes it."""
    type_ids: tuple[str, ...] = ()
    """``forward`` arguments that get token types."""
    suffix_types: bool = False
    """PaliGemma: type 0 on the prefix (the image), 1 on the text after it."""
    cross_attention: bool = False
    """Mllama: the text attends to the image's tiles from the image token on."""

    def input_ids(self, text: torch.Tensor) -> torch.Tensor:
        """``text`` (batch x seq_len, ordinary ids) with the image's block written at the start."""
        ids = text.clone()
        for position, token in enumerate(self.block):
            if token is not None:
                ids[:, position] = token
        return ids

    def extras(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tensors beside ``input_ids``: the processor's, token types and cross-attention masks."""
        out = dict(self.tensors)
        image = ids == self.placeholder
        types = torch.zeros_like(ids)
        types[:, len(self.block) :] = 1
        for name in self.type_ids:
            out[name] = types if self.suffix_types else image.long()
        if self.cross_attention:
            # processing_mllama.py convert_sparse_cross_attention_mask_to_dense: one image per
            # sample, attended from its token to the end, over the tiles it has
            tiles = self.tensors["aspect_ratio_mask"]  # (batch, images, max_tiles)
            after = image.long().cumsum(dim=1) > 0  # (batch, seq)
            out["cross_attention_mask"] = (after[:, :, None, None] & tiles[:, None].bool()).long()
        return out

    def labels(self, ids: torch.Tensor, device: torch.device) -> torch.Tensor:
        """Next-token labels on ``device``: the ids, placeholders masked (-100)."""
        return seed(ids.masked_fill(ids == self.placeholder, IGNORE_INDEX), device)


def splices_image(config: Any) -> bool:
    """Whether ``config``'s model family gets a spliced image (when its ``forward`` takes ``pixel_values``)."""
    return _family(config) is not None and _placeholder(config) is not None and _vision_config(config) is not None


def spliced_image(model: torch.nn.Module, config: Any, params: set[str], batch: int, seq_len: int) -> SplicedImage | None:
    """What the processor makes of one blank picture per sample, or None if the model takes no
    placeholder image or its family is not modelled. Raises if the image needs over ``seq_len`` tokens."""
    if "pixel_values" not in params or not splices_image(config):
        return None
    family, placeholder = _family(config), _placeholder(config)
    assert family is not None and placeholder is not None  # splices_image checked both
    made = _processed(config, family, batch)
    block = family.block(config, model, made, placeholder)
    if len(block) > seq_len:
        raise UnsupportedError(
            f"one image takes {len(block)} tokens of {type(model).__name__}'s text but seq_len is {seq_len}; "
            "raise seq_len or pass inputs=lambda batch_size, seq_len: {...}"
        )
    return SplicedImage(
        block=block,
        placeholder=placeholder,
        tensors={k: v for k, v in made.items() if k in params and isinstance(v, torch.Tensor)},
        type_ids=tuple(name for name in ("token_type_ids", "mm_token_type_ids") if name in params),
        suffix_types=family.suffix_types,
        cross_attention="cross_attention_mask" in params and "aspect_ratio_mask" in made,
    )


# -- image processors --------------------------------------------------------------------------


def _processed(config: Any, family: _Family, batch: int) -> dict[str, Any]:
    """The model type's image processor (PIL backend, defaults sized from the config) on ``batch`` blank pictures."""
    import numpy as np
    import transformers
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    kind = family.image_processor or config.model_type
    names = IMAGE_PROCESSOR_MAPPING_NAMES.get(kind) or {}
    cls = getattr(transformers, names.get("pil", "") or "", None) if isinstance(names, dict) else None
    if cls is None:
        raise UnsupportedError(f"no image processor for {kind!r}; pass inputs=lambda batch_size, seq_len: {{...}}")
    picture = np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
    try:
        processor = cls(**_sized(cls, config))
        with torch.device("cpu"):
            made = processor([[picture]] * batch, return_tensors="pt", **family.call)  # one image per sample
    except ValueError as exc:  # sizes the processor refuses (Aria crops 490 or 980 pixels only)
        raise UnsupportedError(
            f"{cls.__name__} refuses the config's image sizes ({exc}); pass inputs=lambda batch_size, seq_len: {{...}}"
        ) from exc
    # torch's own copies: the processor's arrays live in numpy memory, a collated batch does not
    return {key: value.clone() if isinstance(value, torch.Tensor) else value for key, value in made.items()}


def _sized(cls: type, config: Any) -> dict[str, Any]:
    """Image processor arguments that follow the config where the defaults state a size, a patch
    grid or the anyres grid (hub checkpoints save them in ``preprocessor_config.json``)."""
    defaults, vision = cls(), _vision_config(config)
    side = _first(getattr(vision, "image_size", None))
    size = getattr(defaults, "size", None)
    kwargs: dict[str, Any] = {}
    if isinstance(side, int) and size is not None:
        if getattr(size, "height", None) and getattr(size, "width", None):
            kwargs["size"] = {"height": side, "width": side}
        elif getattr(size, "shortest_edge", None):  # CLIP: resize the short side, crop the centre
            kwargs["size"] = {"shortest_edge": side}
            kwargs["crop_size"] = {"height": side, "width": side}
        elif getattr(size, "longest_edge", None) and _edge(getattr(defaults, "max_image_size", None)):
            tiles = size.longest_edge // _edge(defaults.max_image_size)  # Idefics3: 4 tiles a side
            kwargs["size"] = {"longest_edge": tiles * side}
            kwargs["max_image_size"] = {"longest_edge": side}
        elif getattr(size, "longest_edge", None) and isinstance(getattr(defaults, "patch_size", None), dict):
            # Pixtral: fit the longest edge, round up to merged patches (PixtralProcessor._process_images)
            step = vision.patch_size * int(getattr(config, "spatial_merge_size", 1))
            kwargs["size"] = {"longest_edge": side}
            kwargs["patch_size"] = {"height": step, "width": step}
    if isinstance(side, int) and isinstance(getattr(defaults, "max_image_size", None), int):
        # Aria: crops of the tower's size (AriaProcessor passes 980, the hub towers' size)
        kwargs["max_image_size"] = side
        kwargs["min_image_size"] = min(defaults.min_image_size, side)
    if hasattr(defaults, "image_grid_pinpoints") and getattr(config, "image_grid_pinpoints", None):  # LLaVA-NeXT
        kwargs["image_grid_pinpoints"] = config.image_grid_pinpoints
    if hasattr(defaults, "merge_size"):  # Qwen2-VL: the patch grid the vision tower embeds and merges
        grid = {"patch_size": "patch_size", "temporal_patch_size": "temporal_patch_size", "merge_size": "spatial_merge_size"}
        values = {theirs: getattr(vision, mine, None) for theirs, mine in grid.items()}
        kwargs.update({key: value for key, value in values.items() if isinstance(value, int)})
    return kwargs


def _edge(size: Any) -> int | None:
    """``longest_edge`` of a size given as a ``SizeDict`` or a plain dict (Idefics3's ``max_image_size``)."""
    return size.get("longest_edge") if isinstance(size, dict) else getattr(size, "longest_edge", None)


# -- placeholder blocks, as each processor writes them ------------------------------------------


def _fixed(
    tokens: Callable[[Any, torch.nn.Module], int], before: tuple[str | None, ...] = (), after: tuple[str | None, ...] = ()
):
    """A block of a fixed number of placeholders, between markers (config ids, or None for text)."""

    def block(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
        marks = [_id(config, name) for name in before], [_id(config, name) for name in after]
        return marks[0] + [placeholder] * tokens(config, model) + marks[1]

    return block


def _llava_tokens(config: Any, model: torch.nn.Module) -> int:
    """processing_llava.py LlavaProcessor._get_num_multimodal_tokens: a token per patch, plus
    the tower's extra tokens (CLIP's CLS), less one under the ``default`` feature strategy."""
    vision = _vision_config(config)
    patches = (vision.image_size // vision.patch_size) ** 2
    return patches + _extra_tokens(model) - (getattr(config, "vision_feature_select_strategy", "default") == "default")


def _extra_tokens(model: torch.nn.Module) -> int:
    """Tokens the vision tower adds to its patches (CLIP's CLS: ``num_positions - num_patches``)."""
    embeddings = next((m for n, m in model.named_modules() if n.endswith("embeddings") and hasattr(m, "num_positions")), None)
    if embeddings is None or not hasattr(embeddings, "num_patches"):
        return 0
    return int(embeddings.num_positions - embeddings.num_patches)


def _anyres(onevision: bool):
    """processing_llava_next.py LlavaNextProcessor._get_number_of_features (and LLaVA-OneVision's):
    the base crop's patches (plus the tower's extra tokens for LLaVA-NeXT), then the grid of
    crops ``select_best_resolution`` picks, unpadded to the picture's aspect ratio, with a newline
    per row (OneVision scales that grid down to ``vision_aspect_ratio``'s ``anyres_max_N`` crops);
    one token less under the ``default`` feature strategy."""

    def block(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
        from transformers.image_processing_utils import select_best_resolution

        height, width = made["pixel_values"].shape[-2:]
        picture = made["image_sizes"][0].tolist()  # (height, width) before resizing
        best = select_best_resolution(picture, config.image_grid_pinpoints)
        vision = _vision_config(config)
        patches = (vision.image_size if onevision else height) // vision.patch_size  # a side of the base crop
        rows, cols = patches * (best[0] // height), patches * (best[1] // width)
        if picture[1] / picture[0] > cols / rows:
            rows -= (rows - int(round(picture[0] * (cols / picture[1]), 7))) // 2 * 2
        else:
            cols -= (cols - int(round(picture[1] * (rows / picture[0]), 7))) // 2 * 2
        unpadded, newlines = rows * cols, rows
        if onevision:
            ratio = math.sqrt(rows * cols / (int(config.vision_aspect_ratio.removeprefix("anyres_max_")) * patches**2))
            if ratio > 1.1:
                unpadded, newlines = int(rows // ratio) * int(cols // ratio), int(rows // ratio)
        base = patches**2 + (0 if onevision else _extra_tokens(model))
        count = unpadded + newlines + base - (getattr(config, "vision_feature_select_strategy", "default") == "default")
        return [placeholder] * count

    return block


def _got_ocr2_tokens(config: Any, model: torch.nn.Module) -> int:
    """processing_got_ocr2.py GotOcr2Processor: ``num_image_tokens`` (class default) per crop, one crop by default."""
    from transformers import GotOcr2Processor

    return int(GotOcr2Processor.num_image_tokens)


def _qwen_vl(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
    """processing_qwen2_vl.py Qwen2VLProcessor: ``image_grid_thw.prod() // merge_size**2``
    placeholders between ``<|vision_start|>`` and ``<|vision_end|>`` (the chat template's)."""
    merge = int(getattr(_vision_config(config), "spatial_merge_size", 2))
    count = int(made["image_grid_thw"][0].prod()) // merge**2
    return [_id(config, "vision_start_token_id")] + [placeholder] * count + [_id(config, "vision_end_token_id")]


def _idefics3(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
    """processing_idefics3.py Idefics3Processor.replace_image_token: per tile ``<fake><row_i_col_j>``
    and ``image_seq_len`` placeholders, a newline per row, then the global image between
    ``\\n<fake><global-img>`` and ``<fake>``; ``image_seq_len = (image_size // patch_size)**2 // scale_factor**2``."""
    vision = _vision_config(config)
    count = int((vision.image_size // vision.patch_size) ** 2 / config.scale_factor**2)
    rows, cols = int(made["rows"][0][0]), int(made["cols"][0][0])
    block: Block = []
    for _ in range(rows):
        for _ in range(cols):
            block += [None, None] + [placeholder] * count
        block.append(None)
    block += ([None] if rows else []) + [None, None] + [placeholder] * count + [None]
    return block


def _internvl(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
    """processing_internvl.py InternVLProcessor.replace_image_token: ``<img>``, ``image_seq_length``
    placeholders per crop, ``</img>``; ``image_seq_length = (image_size // patch_size)**2 * downsample_ratio**2``
    (its docstring), the crops ``num_patches`` (the processor crops to patches by default)."""
    vision = _vision_config(config)
    side, patch = (_first(vision.image_size), _first(vision.patch_size))
    per_crop = int((side // patch) ** 2 * config.downsample_ratio**2)
    return [None] + [placeholder] * per_crop * int(made["num_patches"][0]) + [None]


def _aria(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
    """processing_aria.py AriaProcessor.replace_image_token: ``size_conversion[crop side]`` placeholders
    per crop (``num_crops``: the most of any image). The hub's ``size_conversion`` is the projector's
    ``projector_patch_to_query_dict`` keyed by the crop's side, not its patches (490 / 14 = 35, 35**2 = 1225)."""
    side = made["pixel_values"].shape[-1]
    queries = {int(k): v for k, v in config.projector_patch_to_query_dict.items()}
    block: Block = [placeholder]
    return block * queries[(side // _vision_config(config).patch_size) ** 2] * int(made["num_crops"])


def _pixtral(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
    """processing_pixtral.py PixtralProcessor.replace_image_token: per row of ``patch_size *
    spatial_merge_size`` pixels, a placeholder per column then ``[IMG_BREAK]``; the last break is ``[IMG_END]``."""
    step = _vision_config(config).patch_size * int(getattr(config, "spatial_merge_size", 1))
    height, width = (int(v) // step for v in made["image_sizes"][0])
    return ([placeholder] * width + [None]) * height


def _mllama(config: Any, model: torch.nn.Module, made: dict[str, Any], placeholder: int) -> Block:
    """processing_mllama.py: the ``<|image|>`` token stays one token, then ``build_string_from_input``
    puts the bos token after it; the text cross-attends to the tiles."""
    text = getattr(config, "text_config", config)
    bos = _id(text, "bos_token_id")
    return [placeholder, bos if bos is not None and 0 <= bos < text.vocab_size else None]


@dataclass(frozen=True, slots=True)
class _Family:
    block: Callable[[Any, torch.nn.Module, dict[str, Any], int], Block]
    call: dict[str, Any] = field(default_factory=dict)
    """Image processor call arguments the processor passes."""
    suffix_types: bool = False
    image_processor: str | None = None
    """The image processor's model type, where it is not the model's."""


_GEMMA3 = _Family(
    # processing_gemma3.py Gemma3Processor: "\n\n<start_of_image>", image_seq_length (= mm_tokens_per_image)
    # placeholders, "<end_of_image>\n\n"
    block=_fixed(lambda config, model: int(config.mm_tokens_per_image), (None, "boi_token_index"), ("eoi_token_index", None)),
)
_QWEN_VL = _Family(block=_qwen_vl)
_IDEFICS3 = _Family(block=_idefics3, call={"return_row_col_info": True})
_PIXTRAL = _Family(block=_pixtral, image_processor="pixtral")
_FAMILIES: dict[str, _Family] = {
    "llava": _Family(block=_fixed(_llava_tokens)),
    "gemma3": _GEMMA3,
    "shieldgemma2": _GEMMA3,
    # processing_paligemma.py build_string_from_input: image_seq_length placeholders, then bos + prompt
    "paligemma": _Family(block=_fixed(lambda config, model: int(config.text_config.num_image_tokens)), suffix_types=True),
    "got_ocr2": _Family(block=_fixed(_got_ocr2_tokens, (None,), (None,))),  # "<img>" ... "</img>"
    "qwen2_vl": _QWEN_VL,
    "qwen2_5_vl": _QWEN_VL,
    "qwen3_vl": _QWEN_VL,
    "qwen3_vl_moe": _QWEN_VL,
    "idefics3": _IDEFICS3,
    "smolvlm": _IDEFICS3,
    "mllama": _Family(block=_mllama),
    "llava_next": _Family(block=_anyres(onevision=False)),
    "llava_onevision": _Family(block=_anyres(onevision=True)),
    "internvl": _Family(block=_internvl, call={"crop_to_patches": True}),  # InternVLProcessor's images_kwargs
    "aria": _Family(block=_aria),
    "mistral3": _PIXTRAL,
}
"""Model types whose image block is modelled, with the processor source each follows."""


# -- config helpers ------------------------------------------------------------------------------


def _family(config: Any) -> _Family | None:
    """The config's family; a LLaVA with a Pixtral tower (Pixtral-12B) is processed by PixtralProcessor."""
    vision_type = getattr(_vision_config(config), "model_type", None)
    if getattr(config, "model_type", None) == "llava" and vision_type == "pixtral":
        return _PIXTRAL
    return _FAMILIES.get(getattr(config, "model_type", ""))


def _first(value: Any) -> Any:
    """The first of a (height, width) pair, or the value itself."""
    return value[0] if isinstance(value, (list, tuple)) else value


_PLACEHOLDER_KEYS = ("image_token_id", "image_token_index")


def _placeholder(config: Any) -> int | None:
    for source in (config, getattr(config, "text_config", None)):
        for key in _PLACEHOLDER_KEYS:
            value = getattr(source, key, None) if source is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


def _vision_config(config: Any) -> Any:
    return getattr(config, "vision_config", None)


def _id(config: Any, name: str | None) -> int | None:
    value = getattr(config, name, None) if name else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
