"""Image + text inputs match what the real processors make, and a tiny LLaVA trains with its image."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

from vramsim import simulate
from vramsim.config import SimulationConfig
from vramsim.errors import UnsupportedError
from vramsim.validation.measure import measure_cpu
from vramsim.workload.image_text_inputs import IMAGE_SIDE
from vramsim.workload.inputs import default_inputs

TEXT = {
    "vocab_size": 300,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}


def tiny_tokenizer(*tags: str, **special: str) -> Any:
    """A word-level tokenizer that knows only the processor's special tokens and ``tags`` (offline,
    no Hub); a newline is a token of its own, as in the real vocabularies."""
    tokens = [*special.values(), *tags]
    vocab = {"[UNK]": 0, **{token: i + 1 for i, token in enumerate(tokens)}, "\n": len(tokens) + 1}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("\n", "isolated"), pre_tokenizers.Split(" ", "removed")]
    )
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", extra_special_tokens=special)
    tokenizer.add_special_tokens({"additional_special_tokens": tokens})
    return tokenizer


def synthesised(config: Any, class_name: str, seq_len: int, *, train: bool = True) -> dict[str, Any]:
    with torch.device("meta"):
        model = getattr(transformers, class_name)(config)
    with torch.device("cpu"):
        return default_inputs(model, 2, seq_len, train=train)


def processed(processor: Any, prompt: str) -> dict[str, Any]:
    picture = np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
    return dict(processor(text=[prompt], images=[[picture]], return_tensors="pt"))


def assert_matches_the_real_cpu_run(config: Callable[[], Any], **options: Any) -> None:
    """The predicted peak of the step is within 0.5% of the same step run for real on the CPU."""
    predicted = simulate(config(), device="cpu", **options).peak_bytes
    measured = measure_cpu(config(), SimulationConfig(device="cpu", **options)).peak_bytes
    assert predicted / measured == pytest.approx(1.0, abs=0.005), f"predicted {predicted:,} B, measured {measured:,} B"


def llava_config() -> Any:
    vision = transformers.CLIPVisionConfig(**VISION, image_size=32, patch_size=8)
    text = transformers.LlamaConfig(**TEXT, max_position_embeddings=64)
    return transformers.LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=299, architectures=["LlavaForConditionalGeneration"]
    )


def gemma3_config() -> Any:
    vision = transformers.SiglipVisionConfig(**VISION, image_size=32, patch_size=8)
    text = transformers.Gemma3TextConfig(**TEXT, head_dim=16, max_position_embeddings=64)
    return transformers.Gemma3Config(
        vision_config=vision,
        text_config=text,
        mm_tokens_per_image=4,
        boi_token_index=297,
        eoi_token_index=298,
        image_token_index=299,
    )


def test_llava_placeholders_match_the_processor() -> None:
    """CLIP tower, ``default`` strategy: one token per patch (the CLS token is dropped)."""
    config = llava_config()
    image_processor = transformers.LlavaImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    tokenizer = tiny_tokenizer(image_token="<image>")
    processor = transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    real = processed(processor, "<image> describe")
    ours = synthesised(config, "LlavaForConditionalGeneration", 40)
    assert (
        (ours["input_ids"] == 299).sum(dim=1).tolist()
        == [(real["input_ids"] == tokenizer.image_token_id).sum().item()] * 2
        == [16, 16]
    )
    assert ours["pixel_values"].shape[1:] == real["pixel_values"].shape[1:]
    assert ours["input_ids"].shape == (2, 40)
    assert (ours["labels"] == -100).sum().item() == 32 and (ours["labels"][ours["input_ids"] != 299] >= 0).all()


def test_gemma3_placeholders_match_the_processor() -> None:
    """``mm_tokens_per_image`` placeholders between ``<start_of_image>`` and ``<end_of_image>``, typed 1."""
    config = gemma3_config()
    tokenizer = tiny_tokenizer(image_token="<image_soft_token>", boi_token="<start_of_image>", eoi_token="<end_of_image>")
    image_processor = transformers.Gemma3ImageProcessorPil(size={"height": 32, "width": 32})
    processor = transformers.Gemma3Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_length=4)
    real = processed(processor, "<start_of_image> describe")
    ours = synthesised(config, "Gemma3ForConditionalGeneration", 24)
    ids = ours["input_ids"][0].tolist()
    real_ids = real["input_ids"][0].tolist()
    assert ids.count(299) == real_ids.count(tokenizer.image_token_id) == 4
    start = real_ids.index(tokenizer.convert_tokens_to_ids("<start_of_image>"))
    assert ids[ids.index(297) : ids.index(298) + 1] == [297, 299, 299, 299, 299, 298]
    assert real_ids[start : start + 6] == [
        tokenizer.convert_tokens_to_ids(t) for t in ["<start_of_image>"] + ["<image_soft_token>"] * 4 + ["<end_of_image>"]
    ]
    assert ours["pixel_values"].shape[1:] == real["pixel_values"].shape[1:]
    assert ours["token_type_ids"][0].sum().item() == real["token_type_ids"].sum().item() == 4


def qwen2_vl_config() -> Any:
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2}
    text = transformers.Qwen2VLTextConfig(
        **TEXT, max_position_embeddings=512, rope_parameters={"rope_type": "default", "mrope_section": [2, 2, 4]}
    )
    return transformers.Qwen2VLConfig(
        vision_config=vision, text_config=text, image_token_id=299, vision_start_token_id=297, vision_end_token_id=298
    )


def test_qwen2_vl_placeholders_match_the_processor() -> None:
    """``image_grid_thw.prod() // merge_size**2`` placeholders (Qwen2VLProcessor, which needs torchvision
    for its video half, so its formula) over the grid and patches the real image processor makes."""
    config = qwen2_vl_config()
    real = transformers.Qwen2VLImageProcessorPil()(
        images=[np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)], return_tensors="pt"
    )
    ours = synthesised(config, "Qwen2VLForConditionalGeneration", 300)
    count = int(real["image_grid_thw"][0].prod()) // 2**2
    assert (ours["input_ids"] == 299).sum(dim=1).tolist() == [count, count] == [256, 256]
    assert ours["input_ids"][0, : count + 2].tolist() == [297] + [299] * count + [298]
    assert ours["image_grid_thw"].tolist() == real["image_grid_thw"].tolist() * 2
    assert ours["pixel_values"].shape == (2 * real["pixel_values"].shape[0], real["pixel_values"].shape[1])


def test_an_image_longer_than_seq_len_is_refused() -> None:
    with pytest.raises(UnsupportedError, match=r"one image takes 16 tokens .* seq_len is 8; raise seq_len"):
        synthesised(llava_config(), "LlavaForConditionalGeneration", 8)


@pytest.mark.parametrize("task", ["forward", "train"])
def test_a_tiny_llava_with_its_image_matches_the_real_cpu_run(task: str) -> None:
    """The predicted peak of a step fed the synthesised image matches the real CPU run."""
    options = {"task": task, "batch_size": 2, "seq_len": 32}
    assert_matches_the_real_cpu_run(llava_config, **options)


def test_a_tiny_qwen2_vl_with_its_image_matches_the_real_cpu_run() -> None:
    """Qwen2-VL reads its grid back from tensors it builds with ``torch.tensor(..., device=...)``
    (rope indices, merge sizes): the trace keeps those values and matches the real run."""
    options = {"task": "train", "batch_size": 2, "seq_len": 300, "model_class": "Qwen2VLForConditionalGeneration"}
    assert_matches_the_real_cpu_run(qwen2_vl_config, **options)


# -- Idefics3 / SmolVLM: tiles of a pixel-shuffled tower ---------------------------------------

TILE_TAGS = [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
IDEFICS3_TOKENS = {
    "image_token": "<image>",
    "fake_image_token": "<fake_token_around_image>",
    "global_image_token": "<global-img>",
    "end_of_utterance_token": "<end_of_utterance>",
}


def idefics3_config(config_class: type = transformers.Idefics3Config) -> Any:
    """4 x 4 patches a tile, shuffled by 2: 4 tokens a tile (the default configs' 7 x 7 patches cannot shuffle)."""
    vision = transformers.Idefics3VisionConfig(**VISION, image_size=32, patch_size=8)
    text = transformers.LlamaConfig(**TEXT, max_position_embeddings=512)
    return config_class(vision_config=vision, text_config=text, scale_factor=2, image_token_id=299)


def test_idefics3_tiles_match_the_processor() -> None:
    """The picture upscaled to 4 tiles a side: 16 tiles and the global image, 4 placeholders each,
    at the very positions Idefics3Processor writes them (tile tags, newlines, ``<global-img>``)."""
    tokenizer = tiny_tokenizer(*TILE_TAGS, **IDEFICS3_TOKENS)
    image_processor = transformers.Idefics3ImageProcessorPil(size={"longest_edge": 128}, max_image_size={"longest_edge": 32})
    processor = transformers.Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=4)
    real = processed(processor, "<image>")
    ours = synthesised(idefics3_config(), "Idefics3ForConditionalGeneration", 120)
    placeholders = (real["input_ids"][0] == tokenizer.image_token_id).tolist()
    assert len(placeholders) == 108 and sum(placeholders) == 17 * 4
    assert (ours["input_ids"][:, :108] == 299).tolist() == [placeholders] * 2
    assert (ours["input_ids"][:, 108:] != 299).all()
    for name in ("pixel_values", "pixel_attention_mask"):
        assert ours[name].shape[1:] == real[name].shape[1:] and ours[name].shape[0] == 2


def test_smolvlm_tiles_match_the_processor_prompt() -> None:
    """SmolVLMProcessor needs num2words, so its own prompt builder (``get_image_prompt_string``)
    over the rows and columns the real image processor returns."""
    from transformers.models.smolvlm.processing_smolvlm import get_image_prompt_string

    tokenizer = tiny_tokenizer(*TILE_TAGS, **IDEFICS3_TOKENS)
    image_processor = transformers.SmolVLMImageProcessorPil(size={"longest_edge": 128}, max_image_size={"longest_edge": 32})
    picture = np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
    made = image_processor([[picture]], return_row_col_info=True, return_tensors="pt")
    rows, cols = made["rows"][0][0], made["cols"][0][0]
    prompt = get_image_prompt_string(rows, cols, 4, "<fake_token_around_image>", "<image>", "<global-img>")
    real = tokenizer(prompt, return_tensors="pt")["input_ids"][0]
    ours = synthesised(idefics3_config(transformers.SmolVLMConfig), "SmolVLMForConditionalGeneration", 120)
    assert (ours["input_ids"][0, : len(real)] == 299).tolist() == (real == tokenizer.image_token_id).tolist()
    assert (ours["input_ids"] == 299).sum(dim=1).tolist() == [68, 68]
    assert ours["pixel_values"].shape[1:] == made["pixel_values"].shape[1:]


def test_a_tiny_idefics3_with_its_tiles_matches_the_real_cpu_run() -> None:
    """Idefics3 drops all-zero (padding) tiles, reading the pixel values: the trace knows them."""
    options = {"task": "train", "batch_size": 2, "seq_len": 120, "model_class": "Idefics3ForConditionalGeneration"}
    assert_matches_the_real_cpu_run(idefics3_config, **options)


# -- Mllama: one token, cross-attention to the tiles -------------------------------------------


def mllama_config() -> Any:
    """Consistent sizes: the projector takes ``vision_output_dim = hidden_size * (intermediate layers + 1)``."""
    vision = transformers.MllamaVisionConfig(
        **{**VISION, "num_hidden_layers": 2},
        image_size=32,
        patch_size=8,
        max_num_tiles=4,
        num_global_layers=1,
        intermediate_layers_indices=[0, 1],
        vision_output_dim=3 * VISION["hidden_size"],
    )
    text = transformers.MllamaTextConfig(
        **{**TEXT, "num_hidden_layers": 2}, cross_attention_layers=[1], max_position_embeddings=64, pad_token_id=0, bos_token_id=1
    )
    return transformers.MllamaConfig(vision_config=vision, text_config=text, image_token_index=299)


def test_mllama_tiles_and_cross_attention_match_the_processor() -> None:
    """``<|image|>`` then bos, 2 x 2 tiles of the tower's size, every token from the image on
    attending to all 4 tiles (MllamaProcessor's ``cross_attention_mask``)."""
    tokenizer = tiny_tokenizer(image_token="<|image|>", bos_token="<|begin_of_text|>")
    image_processor = transformers.MllamaImageProcessorPil(size={"height": 32, "width": 32})
    real = processed(transformers.MllamaProcessor(image_processor=image_processor, tokenizer=tokenizer), "<|image|> describe")
    ours = synthesised(mllama_config(), "MllamaForConditionalGeneration", 16)
    assert real["input_ids"][0, :2].tolist() == [tokenizer.convert_tokens_to_ids(t) for t in ("<|image|>", "<|begin_of_text|>")]
    assert ours["input_ids"][:, :2].tolist() == [[299, 1]] * 2 and (ours["input_ids"][:, 2:] != 299).all()
    for name in ("pixel_values", "aspect_ratio_ids", "aspect_ratio_mask"):
        assert ours[name].shape[1:] == real[name].shape[1:]
    assert ours["aspect_ratio_ids"].tolist() == real["aspect_ratio_ids"].tolist() * 2
    assert ours["aspect_ratio_mask"].tolist() == real["aspect_ratio_mask"].tolist() * 2
    assert ours["cross_attention_mask"][:, :3].tolist() == real["cross_attention_mask"].tolist() * 2
    assert ours["cross_attention_mask"].shape == (2, 16, 1, 4) and ours["cross_attention_mask"].all()


def test_a_tiny_mllama_with_its_tiles_matches_the_real_cpu_run() -> None:
    options = {"task": "train", "batch_size": 2, "seq_len": 16, "model_class": "MllamaForConditionalGeneration"}
    assert_matches_the_real_cpu_run(mllama_config, **options)


# -- anyres: LLaVA-NeXT and LLaVA-OneVision ----------------------------------------------------

GRID = [[32, 64], [64, 32], [64, 64]]
"""Anyres grid of the tiny towers (32-pixel crops): a square picture gets 2 x 2 crops."""


def llava_next_config() -> Any:
    vision = transformers.CLIPVisionConfig(**VISION, image_size=32, patch_size=8)
    text = transformers.LlamaConfig(**TEXT, max_position_embeddings=512)
    return transformers.LlavaNextConfig(vision_config=vision, text_config=text, image_token_index=299, image_grid_pinpoints=GRID)


def test_llava_next_placeholders_match_the_processor() -> None:
    """Base crop (16, CLS dropped) + the 2 x 2 grid unpadded (8 x 8 = 64) + a newline per row (8) = 88."""
    tokenizer = tiny_tokenizer(image_token="<image>")
    image_processor = transformers.LlavaNextImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, image_grid_pinpoints=GRID
    )
    processor = transformers.LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    real = processed(processor, "<image> describe")
    ours = synthesised(llava_next_config(), "LlavaNextForConditionalGeneration", 120)
    count = (real["input_ids"] == tokenizer.image_token_id).sum().item()
    assert (ours["input_ids"] == 299).sum(dim=1).tolist() == [count, count] == [88, 88]
    assert ours["pixel_values"].shape[1:] == real["pixel_values"].shape[1:] == (5, 3, 32, 32)
    assert ours["image_sizes"].tolist() == real["image_sizes"].tolist() * 2


def test_a_tiny_llava_next_with_its_crops_matches_the_real_cpu_run() -> None:
    options = {"task": "train", "batch_size": 2, "seq_len": 120, "model_class": "LlavaNextForConditionalGeneration"}
    assert_matches_the_real_cpu_run(llava_next_config, **options)


def bare_processor(cls: type, **attributes: Any) -> Any:
    """A processor whose constructor needs torchvision (its video half): only what its image path reads."""
    processor = object.__new__(cls)
    for name, value in attributes.items():
        setattr(processor, name, value)
    return processor


def test_llava_onevision_placeholders_match_the_processor() -> None:
    """The 8 x 8 grid scaled down to ``anyres_max_1`` (4 x 4 + 4 newlines) + the base crop's 16 =
    36, by LlavaOnevisionProcessor.replace_image_token over the real image processor's output."""
    vision = transformers.SiglipVisionConfig(**VISION, image_size=32, patch_size=8)
    text = transformers.Qwen2Config(**TEXT, max_position_embeddings=512)
    config = transformers.LlavaOnevisionConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=299,
        image_grid_pinpoints=GRID,
        vision_aspect_ratio="anyres_max_1",
    )
    image_processor = transformers.LlavaOnevisionImageProcessorPil(size={"height": 32, "width": 32}, image_grid_pinpoints=GRID)
    made = dict(image_processor([[np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)]], return_tensors="pt"))
    processor = bare_processor(
        transformers.LlavaOnevisionProcessor,
        image_processor=image_processor,
        num_image_tokens=16,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_1",
        image_token="<image>",
    )
    count = processor.replace_image_token(made, 0).count("<image>")
    ours = synthesised(config, "LlavaOnevisionForConditionalGeneration", 120)
    assert (ours["input_ids"] == 299).sum(dim=1).tolist() == [count, count] == [36, 36]
    assert ours["pixel_values"].shape[1:] == made["pixel_values"].shape[1:]


# -- InternVL, Aria, Pixtral / Mistral3 ------------------------------------------------------------


def test_internvl_placeholders_match_the_processor() -> None:
    """3 x 3 crops and a thumbnail, 4 placeholders each (16 patches shuffled by 0.5) between
    ``<img>`` and ``</img>``, by InternVLProcessor.replace_image_token over GotOcr2's crops."""
    vision = transformers.InternVLVisionConfig(**VISION, image_size=32, patch_size=8)
    text = transformers.Qwen2Config(**TEXT, max_position_embeddings=512)
    config = transformers.InternVLConfig(vision_config=vision, text_config=text, image_token_id=299, image_seq_length=4)
    image_processor = transformers.GotOcr2ImageProcessorPil(size={"height": 32, "width": 32})
    made = image_processor([np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)], crop_to_patches=True, return_tensors="pt")
    processor = bare_processor(
        transformers.InternVLProcessor, image_seq_length=4, start_image_token="<img>", end_image_token="</img>", image_token="<I>"
    )
    text = processor.replace_image_token(made, 0)
    ours = synthesised(config, "InternVLForConditionalGeneration", 120)
    assert (ours["input_ids"] == 299).sum(dim=1).tolist() == [text.count("<I>")] * 2 == [40, 40]
    assert ours["input_ids"][0, 1:41].eq(299).all() and ours["input_ids"][0, 41] != 299
    assert ours["pixel_values"].shape == (2 * made["pixel_values"].shape[0], *made["pixel_values"].shape[1:])


def aria_config() -> Any:
    """Aria's image processor knows 490- and 980-pixel crops only: 1225 patches of 14, 4 queries."""
    vision = transformers.Idefics3VisionConfig(**VISION, image_size=490, patch_size=14)
    text = transformers.AriaTextConfig(**TEXT, max_position_embeddings=64, moe_num_experts=4, moe_topk=2)
    return transformers.AriaConfig(
        vision_config=vision, text_config=text, image_token_id=299, projector_patch_to_query_dict={1225: 4}
    )


def test_aria_placeholders_match_the_processor() -> None:
    """One 490-pixel crop, ``size_conversion[490]`` (the projector's 4 queries) placeholders."""
    config = aria_config()
    tokenizer = tiny_tokenizer(image_token="<|img|>")
    image_processor = transformers.AriaImageProcessorPil(max_image_size=490)
    processor = transformers.AriaProcessor(image_processor=image_processor, tokenizer=tokenizer, size_conversion={490: 4})
    picture = np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
    real = processor(text=["<|img|> describe"], images=[[picture]], max_image_size=490, return_tensors="pt")  # its default: 980
    ours = synthesised(config, "AriaForConditionalGeneration", 16)
    count = (real["input_ids"] == tokenizer.image_token_id).sum().item()
    assert (ours["input_ids"] == 299).sum(dim=1).tolist() == [count, count] == [4, 4]
    for name in ("pixel_values", "pixel_mask"):
        assert ours[name].shape == (2, *real[name].shape[1:])


def test_sizes_the_image_processor_refuses_are_a_one_line_error() -> None:
    """Aria's image processor crops 490 or 980 pixels only: a 32-pixel tower is refused, not traced wrong."""
    config = aria_config()
    config.vision_config.image_size = 32
    with pytest.raises(UnsupportedError, match=r"AriaImageProcessorPil refuses the config's image sizes \(max_image_size must"):
        synthesised(config, "AriaForConditionalGeneration", 16)


def pixtral_vision() -> Any:
    return transformers.PixtralVisionConfig(**VISION, image_size=32, patch_size=8, head_dim=16)


@pytest.mark.parametrize("merge", [1, 2])
def test_pixtral_rows_match_the_processor(merge: int) -> None:
    """A row of ``[IMG]`` per ``patch_size * spatial_merge_size`` pixels, ``[IMG_BREAK]`` after each,
    ``[IMG_END]`` last: Pixtral-12B (a LLaVA with a Pixtral tower) and Mistral 3 (merging 2 x 2)."""
    text = transformers.MistralConfig(**TEXT, max_position_embeddings=512)
    if merge == 1:
        config = transformers.LlavaConfig(
            vision_config=pixtral_vision(), text_config=text, image_token_index=299, vision_feature_select_strategy="full"
        )
        class_name = "LlavaForConditionalGeneration"
    else:
        config = transformers.Mistral3Config(
            vision_config=pixtral_vision(), text_config=text, image_token_index=299, spatial_merge_size=2
        )
        class_name = "Mistral3ForConditionalGeneration"
    # PixtralProcessor imports torchvision: its steps, from processing_pixtral.py. _process_images runs
    # the image processor with patch_size * spatial_merge_size; replace_image_token writes a row of
    # [IMG] per (height // that) rows, a [IMG_BREAK] after each and turns the last into [IMG_END]
    step = 8 * merge
    image_processor = transformers.PixtralImageProcessorPil(size={"longest_edge": 32}, patch_size={"height": step, "width": step})
    real = image_processor([[np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)]], return_tensors="pt")
    height, width = (int(v) // step for v in real["image_sizes"][0])
    side = 4 // merge
    assert (height, width) == (side, side)
    placeholders = ([True] * width + [False]) * height
    ours = synthesised(config, class_name, 40)
    assert (ours["input_ids"][:, : len(placeholders)] == 299).tolist() == [placeholders] * 2
    assert (ours["input_ids"] == 299).sum().item() == 2 * side * side
    assert (ours["input_ids"][:, len(placeholders) :] != 299).all()
    assert ours["pixel_values"].shape[1:] == real["pixel_values"].shape[1:]
    assert ours["image_sizes"].tolist() == real["image_sizes"].tolist() * 2


def test_a_tiny_aria_forward_matches_the_real_cpu_run() -> None:
    """Aria sums its bool patch mask to int64, which first copies the mask to int64 (tracer/kernels/reductions.py)."""
    options = {"task": "forward", "batch_size": 2, "seq_len": 16, "model_class": "AriaForConditionalGeneration"}
    assert_matches_the_real_cpu_run(aria_config, **options)


# -- contrastive image-text models: their loss asked for -----------------------------------------


def clip_config() -> Any:
    text = transformers.CLIPTextConfig(**VISION, vocab_size=300, max_position_embeddings=32)
    vision = transformers.CLIPVisionConfig(**VISION, image_size=32, patch_size=8)
    return transformers.CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=16)


def test_clip_trains_on_its_own_contrastive_loss_as_the_real_cpu_run() -> None:
    """CLIP takes no labels: a training step asks it for its contrastive loss (``return_loss=True``), over the text
    and an image per sample, and its peak matches the real CPU run's."""
    batch = synthesised(clip_config(), "CLIPModel", 16)
    assert batch["return_loss"] is True
    assert batch["pixel_values"].shape == (2, 3, 32, 32)
    assert "return_loss" not in synthesised(clip_config(), "CLIPModel", 16, train=False)
    assert_matches_the_real_cpu_run(clip_config, task="train", batch_size=2, seq_len=16, model_class="CLIPModel")
